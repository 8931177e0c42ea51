# SPDX-License-Identifier: MIT
"""protoc_text.py - protoc's text format (what `protoc --decode` prints)
read back, for the checkers that have protoc decode our protobuf:
tests/perfetto/check-perfetto.py and tests/otlp/receiver.py."""
import re
from collections import defaultdict

FIELD = re.compile(r'^\s*([A-Za-z_0-9]+)(?::\s*(.*)| \{)$')
SIMPLE = {'n': 10, 't': 9, 'r': 13, '"': 34, "'": 39, '\\': 92, 'a': 7, 'b': 8, 'f': 12,
          'v': 11, '?': 63}


def unquote(s):
    """A text-format string literal (C escapes, octal bytes) as bytes."""
    out, i = bytearray(), 1
    while i < len(s) - 1:
        c = s[i]
        if c != '\\':
            out += c.encode()
            i += 1
        elif s[i + 1] in SIMPLE:
            out.append(SIMPLE[s[i + 1]])
            i += 2
        elif s[i + 1] == 'x':
            m = re.match(r'[0-9a-fA-F]{1,2}', s[i + 2:])
            out.append(int(m.group(0), 16))
            i += 2 + len(m.group(0))
        else:
            m = re.match(r'[0-7]{1,3}', s[i + 1:])
            out.append(int(m.group(0), 8))
            i += 1 + len(m.group(0))
    return bytes(out)


def parse(lines, value, named_only=False):
    """The messages as dicts of lists (field -> its values in order), a
    nested message a dict, a scalar value(raw) of the text after 'field: '.
    named_only: a field printed by its number (not in the .proto) is an
    error. Raises ValueError('LINE: why') on what it cannot read."""
    root = defaultdict(list)
    stack = [root]
    for n, line in enumerate(lines, 1):
        line = line.rstrip('\n')
        if not line.strip():
            continue
        if line.strip() == '}':
            stack.pop()
            continue
        m = FIELD.match(line)
        if not m:
            raise ValueError(f"{n}: cannot read '{line}'")
        key, raw = m.group(1), m.group(2)
        if named_only and key.isdigit():
            raise ValueError(f"{n}: field {key} is none of the .proto's")
        if raw is None:
            msg = defaultdict(list)
            stack[-1][key].append(msg)
            stack.append(msg)
        else:
            stack[-1][key].append(value(raw))
    return root
