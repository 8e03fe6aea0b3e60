#!/usr/bin/env python3
"""The ten slowest tests of a cargo-nextest JUnit report (`.ci/run`, docs/performance.md)."""
import sys
import xml.etree.ElementTree as ET

path = sys.argv[1] if len(sys.argv) > 1 else "target/nextest/ci/junit.xml"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
root = ET.parse(path).getroot()
cases = [
    (float(case.get("time", "0")), f"{suite.get('name')} {case.get('name')}")
    for suite in root.iter("testsuite")
    for case in suite.iter("testcase")
]
print(f"the {min(count, len(cases))} slowest of {len(cases)} tests (s):")
for seconds, name in sorted(cases, reverse=True)[:count]:
    print(f"{seconds:8.1f}  {name}")
