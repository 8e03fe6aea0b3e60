// Checks the generated JSON Schemas with an independent validator: Ajv, draft 2020-12, strict.
//
//   node tests/ajv/check.mjs DIR     (DIR from `cargo run -p svc-e2e --bin corpus-export -- DIR`)
//
// Each schema must be a valid 2020-12 schema that compiles in strict mode; it must accept every
// valid corpus document of its version (and every materialized policy), and refuse every
// document whose fault is shape-only, except those `validator-only.json` lists with the reason
// only the validator catches them. Cross-field faults (layer 2) are the validator's alone.
import fs from "node:fs";
import path from "node:path";
import Ajv2020 from "ajv/dist/2020.js";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node check.mjs DIR");
  process.exit(2);
}
const listed = JSON.parse(fs.readFileSync(new URL("./validator-only.json", import.meta.url), "utf8"));
const ajv = new Ajv2020({ strict: true, allErrors: true });
const load = (name) => JSON.parse(fs.readFileSync(path.join(dir, `${name}.schema.json`), "utf8"));

const failures = [];
const validators = {};
for (const [version, name] of [[4, "manifest-v4"], [5, "manifest-v5"], ["policy", "policy-v4"]]) {
  const schema = load(name);
  if (!ajv.validateSchema(schema)) failures.push(`${name}: not a valid 2020-12 schema: ${ajv.errorsText()}`);
  validators[version] = ajv.compile(schema);
}

const lines = fs.readFileSync(path.join(dir, "corpus.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const counts = { accepted: 0, refused: 0, validatorOnly: [], crossField: [] };
const used = new Set();
for (const c of lines) {
  const validate = validators[c.version];
  const ok = validate(c.document);
  if (c.valid) {
    if (ok) counts.accepted++;
    else failures.push(`${c.name}: valid, but the schema refuses it: ${ajv.errorsText(validate.errors)}`);
  } else if (c.shapeOnly) {
    if (!ok) {
      counts.refused++;
      if (listed[c.name]) failures.push(`${c.name}: listed in validator-only.json, but the schema refuses it (stale entry)`);
    } else if (listed[c.name]) {
      used.add(c.name);
      counts.validatorOnly.push(`${c.name}: ${listed[c.name]}`);
    } else {
      failures.push(`${c.name}: shape-only fault (${c.codes.join(", ")}) that the schema accepts`);
    }
  } else if (ok) {
    counts.crossField.push(`${c.name}: ${c.codes.join(", ")}`);
  }
}
for (const name of Object.keys(listed)) {
  if (!used.has(name) && !failures.some((f) => f.startsWith(name))) failures.push(`${name}: listed in validator-only.json but not a corpus case any more`);
}

console.log(`ajv ${Ajv2020.prototype.constructor.name} strict: ${lines.length} documents; ${counts.accepted} valid accepted, ${counts.refused} shape-only faults refused`);
console.log(`caught only by the validator (shape rules a schema cannot state), ${counts.validatorOnly.length}:`);
for (const l of counts.validatorOnly) console.log(`  ${l}`);
console.log(`caught only by the validator (parse-level and cross-field rules), ${counts.crossField.length}:`);
for (const l of counts.crossField) console.log(`  ${l}`);
if (failures.length) {
  console.error(`\n${failures.length} failure(s):`);
  for (const f of failures) console.error(`  ${f}`);
  process.exit(1);
}
console.log(`${counts.accepted + counts.refused} passed, 0 failed`);
