#!/usr/bin/env python3
"""Structural check of the manifest conformance corpus (tests/corpus).

Checks structure only, never what the validator answers:
- every case file has a `<name>.expect.json` beside it, and every expect file has a case;
- case names are kebab-case; V4 cases are `.json` except the `yaml_not_supported_for_v4` case;
- every expect file is well formed (description, valid, diagnostics, rows, optional edge),
  and `valid` agrees with the diagnostics (valid <=> no error diagnostic);
- rows.json is well formed, its ids are unique, and every id a case names exists;
- every row that is not excluded has at least one case;
- every bound of every non-excluded row has an `at`, `below` and `above` case, and each
  edge case's verdict agrees with its point (min/below and max/above are invalid, the
  other four points are valid);
- there are at least 150 cases.

Usage: python3 tests/corpus/check_corpus.py [CORPUS_DIR]   (default: this file's directory)
Exit 0 when every check passes, 1 otherwise (each problem is printed).
"""
import json
import os
import re
import sys

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
CODE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
CASE_EXTS = (".json", ".yaml", ".yml")
MIN_CASES = 150


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
    problems = []

    def bad(msg):
        problems.append(msg)

    # ------------------------------------------------------------- rows
    rows_path = os.path.join(root, "rows.json")
    rows = {}
    try:
        with open(rows_path, encoding="utf-8") as f:
            row_list = json.load(f)
    except (OSError, ValueError) as e:
        print(f"rows.json: cannot read: {e}")
        return 1
    if not isinstance(row_list, list):
        bad("rows.json: the root must be an array")
        row_list = []
    for i, r in enumerate(row_list):
        where = f"rows.json[{i}]"
        if not isinstance(r, dict):
            bad(f"{where}: must be an object")
            continue
        unknown = set(r) - {"id", "table", "text", "layer", "bounds", "excluded"}
        if unknown:
            bad(f"{where}: unknown keys {sorted(unknown)}")
        rid = r.get("id")
        if not isinstance(rid, str) or not re.fullmatch(r"(errors|limits)/[a-z0-9]+(-[a-z0-9]+)*", rid):
            bad(f"{where}: id must be 'errors/<kebab>' or 'limits/<kebab>', got {rid!r}")
            continue
        if rid in rows:
            bad(f"{where}: duplicate id {rid}")
        if r.get("table") not in ("errors", "limits") or not rid.startswith(str(r.get("table")) + "/"):
            bad(f"{where}: table must be 'errors' or 'limits' and match the id prefix")
        if not isinstance(r.get("text"), str) or not r["text"].strip():
            bad(f"{where}: text must be a non-empty string")
        excluded = r.get("excluded")
        if excluded is not None and (not isinstance(excluded, str) or not excluded.strip()):
            bad(f"{where}: excluded must be a non-empty reason")
        if excluded is None:
            if r.get("layer") not in (1, 2):
                bad(f"{where}: a non-excluded row needs layer 1 or 2")
        bounds = r.get("bounds")
        if bounds is not None:
            if r.get("table") != "limits":
                bad(f"{where}: only limits rows have bounds")
            if (not isinstance(bounds, list) or not bounds or len(set(bounds)) != len(bounds)
                    or not set(bounds) <= {"min", "max"}):
                bad(f"{where}: bounds must be a non-empty list of distinct 'min'/'max'")
        rows[rid] = r

    # ------------------------------------------------------------- cases
    cases = []  # (relpath, expect)
    for ver in ("v4", "v5"):
        d = os.path.join(root, ver)
        if not os.path.isdir(d):
            bad(f"{ver}/: missing directory")
            continue
        names = sorted(os.listdir(d))
        expects = {n[: -len(".expect.json")] for n in names if n.endswith(".expect.json")}
        case_files = {}
        for n in names:
            if n.endswith(".expect.json"):
                continue
            stem, ext = os.path.splitext(n)
            if ext not in CASE_EXTS:
                bad(f"{ver}/{n}: unexpected file (cases end in .json or .yaml)")
                continue
            if stem in case_files:
                bad(f"{ver}/{n}: two case files named {stem}")
            case_files[stem] = n
        for stem in sorted(set(case_files) | expects):
            rel = f"{ver}/{case_files.get(stem, stem)}"
            if stem not in expects:
                bad(f"{rel}: no {stem}.expect.json")
                continue
            if stem not in case_files:
                bad(f"{ver}/{stem}.expect.json: no case file")
                continue
            if not KEBAB.match(stem):
                bad(f"{rel}: case name is not kebab-case")
            if ver == "v4" and not case_files[stem].endswith(".json") and stem != "yaml-not-supported-for-v4":
                bad(f"{rel}: V4 cases are JSON (only yaml-not-supported-for-v4 may be YAML)")
            try:
                with open(os.path.join(d, f"{stem}.expect.json"), encoding="utf-8") as f:
                    exp = json.load(f)
            except (OSError, ValueError) as e:
                bad(f"{ver}/{stem}.expect.json: cannot read: {e}")
                continue
            check_expect(rel, exp, rows, bad)
            cases.append((rel, exp))

    if len(cases) < MIN_CASES:
        bad(f"only {len(cases)} cases; at least {MIN_CASES} are required")

    # ------------------------------------------------------------- coverage
    covered = {}
    edges = {}
    for rel, exp in cases:
        if not isinstance(exp, dict) or not isinstance(exp.get("rows"), list):
            continue
        for rid in exp["rows"]:
            covered.setdefault(rid, []).append(rel)
        edge = exp.get("edge")
        if isinstance(edge, dict) and exp["rows"]:
            edges.setdefault((exp["rows"][0], edge.get("bound"), edge.get("point")), []).append(rel)
    for rid, r in rows.items():
        if r.get("excluded"):
            continue
        if rid not in covered:
            bad(f"row {rid}: no case")
        for bound in r.get("bounds") or []:
            for point in ("at", "below", "above"):
                if (rid, bound, point) not in edges:
                    bad(f"row {rid}: no case for bound {bound}, point {point}")

    for p in problems:
        print(p)
    v4 = sum(1 for rel, _ in cases if rel.startswith("v4/"))
    yaml_n = sum(1 for rel, _ in cases if rel.endswith((".yaml", ".yml")))
    valid_n = sum(1 for _, e in cases if isinstance(e, dict) and e.get("valid") is True)
    print(f"{len(cases)} cases (v4 {v4}, v5 {len(cases) - v4}; yaml {yaml_n}; valid {valid_n}, "
          f"invalid {len(cases) - valid_n}); {len(rows)} rows, "
          f"{sum(1 for r in rows.values() if r.get('excluded'))} excluded; "
          f"{'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 0 if not problems else 1


def check_expect(rel, exp, rows, bad):
    if not isinstance(exp, dict):
        bad(f"{rel}: expect must be an object")
        return
    unknown = set(exp) - {"description", "valid", "diagnostics", "rows", "edge"}
    if unknown:
        bad(f"{rel}: unknown expect keys {sorted(unknown)}")
    for key in ("description", "valid", "diagnostics", "rows"):
        if key not in exp:
            bad(f"{rel}: expect lacks {key}")
    if not isinstance(exp.get("description", ""), str) or not exp.get("description", "x").strip():
        bad(f"{rel}: description must be a non-empty string")
    if not isinstance(exp.get("valid"), bool):
        bad(f"{rel}: valid must be a boolean")
    diags = exp.get("diagnostics")
    has_error = False
    if not isinstance(diags, list):
        bad(f"{rel}: diagnostics must be an array")
        diags = []
    for i, dg in enumerate(diags):
        where = f"{rel}: diagnostics[{i}]"
        if not isinstance(dg, dict):
            bad(f"{where}: must be an object")
            continue
        required = {"severity", "code", "pointer", "layer"}
        if not required <= set(dg) or not set(dg) <= required | {"line", "column"}:
            bad(f"{where}: keys must be severity, code, pointer, layer, and optionally line and column")
        if dg.get("severity") not in ("error", "warning"):
            bad(f"{where}: severity must be error or warning")
        has_error |= dg.get("severity") == "error"
        if not isinstance(dg.get("code"), str) or not CODE.match(dg["code"]):
            bad(f"{where}: code must be snake_case")
        ptr = dg.get("pointer")
        if not isinstance(ptr, str) or (ptr and not ptr.startswith("/")) or re.search(r"~[^01]|~$", ptr or ""):
            bad(f"{where}: pointer must be an RFC 6901 pointer ('' or starting with '/')")
        if not isinstance(dg.get("layer"), int) or isinstance(dg.get("layer"), bool) or not 1 <= dg["layer"] <= 7:
            bad(f"{where}: layer must be an integer 1-7")
    if isinstance(exp.get("valid"), bool) and exp["valid"] == has_error:
        bad(f"{rel}: valid is {exp['valid']} but the diagnostics {'hold' if has_error else 'hold no'} error")
    rids = exp.get("rows")
    if not isinstance(rids, list) or not all(isinstance(x, str) for x in rids):
        bad(f"{rel}: rows must be an array of strings")
        rids = []
    if len(set(rids)) != len(rids):
        bad(f"{rel}: rows repeats an id")
    for rid in rids:
        if rid not in rows:
            bad(f"{rel}: unknown row id {rid}")
    edge = exp.get("edge")
    if edge is not None:
        if not isinstance(edge, dict) or set(edge) != {"bound", "point"}:
            bad(f"{rel}: edge must be {{bound, point}}")
            return
        if edge["bound"] not in ("min", "max") or edge["point"] not in ("at", "below", "above"):
            bad(f"{rel}: edge bound must be min/max and point at/below/above")
            return
        if not rids:
            bad(f"{rel}: edge needs a row (the first id in rows)")
            return
        r = rows.get(rids[0])
        if r is not None and edge["bound"] not in (r.get("bounds") or []):
            bad(f"{rel}: row {rids[0]} has no {edge['bound']} bound")
        should_fail = (edge["bound"], edge["point"]) in (("min", "below"), ("max", "above"))
        if isinstance(exp.get("valid"), bool) and exp["valid"] == should_fail:
            bad(f"{rel}: {edge['bound']}/{edge['point']} should be {'invalid' if should_fail else 'valid'}")


if __name__ == "__main__":
    sys.exit(main())
