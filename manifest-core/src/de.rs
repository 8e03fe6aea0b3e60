//! Reads the typed model from a checked, defaulted tree with serde, without an intermediate
//! `serde_json::Value`. Strictness is layer 1's job: by the time this runs the tree has the
//! model's shape, so a failure here is an internal error, never the author's.

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use crate::tree::{Member, Node, Number, Value};

/// A model that does not fit its tree (a table and a struct disagree).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(String);

impl de::Error for ModelError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        ModelError(msg.to_string())
    }
}

/// Reads `T` from a node.
pub(crate) fn from_node<T: DeserializeOwned>(node: &Node<'_>) -> Result<T, ModelError> {
    T::deserialize(node)
}

impl<'de, 'a> de::Deserializer<'de> for &'de Node<'a> {
    type Error = ModelError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        match &self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(Number::Integer(i)) => match (u64::try_from(*i), i64::try_from(*i)) {
                (Ok(u), _) => visitor.visit_u64(u),
                (_, Ok(s)) => visitor.visit_i64(s),
                _ => visitor.visit_i128(*i),
            },
            Value::Number(Number::Float(f)) => visitor.visit_f64(*f),
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(members) => visitor.visit_map(Members { iter: members.iter(), value: None }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ModelError> {
        match &self.value {
            // Unit variants (`"immediate"`); tagged unions go through `deserialize_any`.
            Value::String(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            _ => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

struct Items<'de, 'a>(std::slice::Iter<'de, Node<'a>>);

impl<'de> SeqAccess<'de> for Items<'de, '_> {
    type Error = ModelError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, ModelError> {
        self.0.next().map(|n| seed.deserialize(n)).transpose()
    }
}

struct Members<'de, 'a> {
    iter: std::slice::Iter<'de, Member<'a>>,
    value: Option<&'de Node<'a>>,
}

impl<'de> MapAccess<'de> for Members<'de, '_> {
    type Error = ModelError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ModelError> {
        match self.iter.next() {
            Some(m) => {
                self.value = Some(&m.value);
                let key: de::value::BorrowedStrDeserializer<'de, ModelError> =
                    de::value::BorrowedStrDeserializer::new(&m.key);
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ModelError> {
        match self.value.take() {
            Some(v) => seed.deserialize(v),
            None => Err(de::Error::custom("value requested before key")),
        }
    }
}
