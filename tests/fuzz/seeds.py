"""Writes small valid seed files for the fuzz targets: OUT/corpus-gguf/seed.gguf,
OUT/corpus-safetensors/seed.safetensors, OUT/corpus-grammar/seed-N.txt (a schema, a NUL
byte, a document) and OUT/corpus-guard/seed-N.txt (two questions, a NUL byte between).
usage: python3 seeds.py OUT"""

import json
import os
import struct
import sys


def s(b):
    return struct.pack("<Q", len(b)) + b


def gguf():
    kv = s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama")
    kv += s(b"llama.block_count") + struct.pack("<II", 4, 2)
    kv += s(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2) + s(b"a") + s(b"bc")
    kv += s(b"general.alignment") + struct.pack("<II", 4, 32)
    ti = s(b"w") + struct.pack("<IQIQ", 1, 32, 8, 0)
    ti += s(b"n") + struct.pack("<IQIQ", 1, 4, 0, 64)
    head = b"GGUF" + struct.pack("<IQQ", 3, 2, 4) + kv + ti
    head += b"\0" * (-len(head) % 32)
    return head + bytes(range(34)) + b"\0" * 30 + struct.pack("<4f", 1, 2, 3, 4)


def safetensors():
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                         "b": {"dtype": "F16", "shape": [2], "data_offsets": [16, 20]}}).encode()
    return struct.pack("<Q", len(header)) + header + struct.pack("<4f", 1, 2, 3, 4) + b"\0<\0@"


def grammars():
    person = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 1, None]}, "maxItems": 2},
        "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["name"], "additionalProperties": False}
    return [json.dumps(person).encode() + b"\0" +
            b'{"name": "Bo", "age": -12, "tags": ["a", 1], "next": {"name": "x\\u00e9"}}',
            b"\0" + b'{\n  "k": [1.5e3, true, null, {"x": "\xc3\xa9"}]\n}',
            b'{"$defs": {"L": {"$ref": "#/$defs/L"}}, "$ref": "#/$defs/L"}\0' + b"1",
            b'{"type": "array", "items": {"type": ["number", "integer"], "minimum": -2.5, '
            b'"exclusiveMaximum": 1e3, "multipleOf": 0.25}}\0' + b"[-2.25, 999.75, 0.5]",
            b'{"type": "object", "properties": {"c": {"type": "string", "pattern": '
            b'"^(?:[A-Z]{2}|x\\\\d+)-[^\\\\s]*$", "maxLength": 9}, "d": {"type": "string", '
            b'"format": "date-time"}}}\0' + b'{"c": "AB-\xc3\xa9\\n", "d": "2024-01-02T03:04:05Z"}']


def guards():
    ctx = "The tower is in Paris. It was finished in 1889. It is 330 metres tall.\n"
    return [b"What is 15% of 80?\0what's 15 as a percentage of 80",
            b'translate "he is tired" into Spanish: now\0Translate "she is tired" into Spanish',
            (ctx + "The vote passed. " + ctx + "Question: What was the result?").encode() +
            b"\0" + (ctx + "It was delayed. " + ctx + "Question: What happened?").encode(),
            b"How do I cook a turkey in C#?\0how to cook in Turkey with C sharp \xc2\xb0F",
            b"Things to do in New York City\0NYC: things to do in a nyc"]


def main():
    out = sys.argv[1]
    seeds = [("gguf", "seed.gguf", gguf()), ("safetensors", "seed.safetensors", safetensors())]
    seeds += [("grammar", f"seed-{i}.txt", g) for i, g in enumerate(grammars())]
    seeds += [("guard", f"seed-{i}.txt", g) for i, g in enumerate(guards())]
    for name, file, data in seeds:
        d = os.path.join(out, "corpus-" + name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, file), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
