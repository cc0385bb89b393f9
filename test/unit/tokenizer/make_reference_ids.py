#!/usr/bin/env python3
"""Writes Inputs/reference_ids.jsonl: the ids tiktoken gives C4 documents.

TokenizerTests' Tokenizers.ReferenceIds compares Tetra's GPT-2 and Llama 3
tokenizers with these ids. Needs `pip install tiktoken` (not available on
the build machines, which have no PyPI). Run from anywhere:

  python3 test/unit/tokenizer/make_reference_ids.py [--docs N]

Each line: {"tokenizer": "gpt2"|"llama3", "doc": INDEX, "ids": [...]}, where
INDEX counts the non-empty lines of data/c4/c4-train.sample.json.gz and then
data/c4/c4-validation.sample.json.gz (the order the test reads them in).
Documents are encoded as plain text (encode_ordinary: no special tokens).
"""

import argparse
import base64
import gzip
import json
import os

import tiktoken

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"""
                  r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
                  r"""|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
          + list(range(0xAE, 0xFF + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def gpt2_encoding():
    # From the repository's own files, not a download.
    decoder = {v: k for k, v in bytes_to_unicode().items()}
    with open(os.path.join(ROOT, "data/tokenizers/gpt2/encoder.json")) as f:
        encoder = json.load(f)
    ranks = {}
    for token, i in encoder.items():
        if token == "<|endoftext|>":
            continue
        ranks[bytes(decoder[c] for c in token)] = i
    return tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN,
                             mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def llama3_encoding():
    ranks = {}
    with open(os.path.join(ROOT, "data/tokenizers/llama3/tokenizer.model")) as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding("llama3", pat_str=LLAMA3_PATTERN,
                             mergeable_ranks=ranks, special_tokens={})


def documents():
    for name in ("c4-train.sample.json.gz", "c4-validation.sample.json.gz"):
        with gzip.open(os.path.join(ROOT, "data/c4", name), "rt",
                       encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)["text"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200,
                        help="how many documents per tokenizer (default 200)")
    parser.add_argument("-o", default=os.path.join(
        os.path.dirname(__file__), "Inputs", "reference_ids.jsonl"))
    args = parser.parse_args()
    encodings = {"gpt2": gpt2_encoding(), "llama3": llama3_encoding()}
    with open(args.o, "w") as out:
        for index, text in enumerate(documents()):
            if index >= args.docs:
                break
            for name, encoding in encodings.items():
                ids = encoding.encode_ordinary(text)
                out.write(json.dumps({"tokenizer": name, "doc": index,
                                      "ids": ids}) + "\n")


if __name__ == "__main__":
    main()
