#!/usr/bin/env python3
"""Checks a `tetra export --format hf` directory against the Tetra checkpoint
it came from, independently of the exporter: every parameter under its
Hugging Face name with the same shape and bytes, but for the query and key
projections, whose rows within each head must be Tetra's interleaved RoPE
pairs reordered to rotate-half (Tetra row 2i + j -> row j * head_dim/2 + i).
Standard library only.

  check_hf_export.py CHECKPOINT EXPORT_DIR
"""

import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], body[begin:end])
    return tensors


LAYER = {
    "attn_norm": "input_layernorm.weight",
    "attn.wq": "self_attn.q_proj.weight",
    "attn.wk": "self_attn.k_proj.weight",
    "attn.wv": "self_attn.v_proj.weight",
    "attn.wo": "self_attn.o_proj.weight",
    "mlp_norm": "post_attention_layernorm.weight",
    "mlp.gate": "mlp.gate_proj.weight",
    "mlp.up": "mlp.up_proj.weight",
    "mlp.down": "mlp.down_proj.weight",
}


def hf_name(name):
    if name == "embed":
        return "model.embed_tokens.weight"
    if name == "norm":
        return "model.norm.weight"
    if name == "lm_head":
        return "lm_head.weight"
    _, layer, field = name.split(".", 2)
    return "model.layers.%s.%s" % (layer, LAYER[field])


def main(checkpoint, export):
    tetra = {k: v for k, v in read(checkpoint).items()
             if not k.startswith("optimizer.")}
    hf = read(export + "/model.safetensors")
    config = json.load(open(export + "/config.json"))
    hd = config["head_dim"]
    if len(hf) != len(tetra):
        sys.exit("%d tensors in the export, %d parameters" % (len(hf), len(tetra)))
    for name, (dtype, shape, data) in tetra.items():
        out = hf.get(hf_name(name))
        if out is None:
            sys.exit("%s: no %s in the export" % (name, hf_name(name)))
        if out[0] != dtype or out[1] != shape:
            sys.exit("%s: %s %s, exported %s %s" % (name, dtype, shape, out[0], out[1]))
        expected = data
        if name.endswith(".attn.wq") or name.endswith(".attn.wk"):
            row = 4 * shape[1]
            heads = shape[0] // hd
            rows = [data[r * row:(r + 1) * row] for r in range(shape[0])]
            permuted = [None] * shape[0]
            for h in range(heads):
                for i in range(hd // 2):
                    for j in range(2):
                        permuted[h * hd + j * (hd // 2) + i] = rows[h * hd + 2 * i + j]
            expected = b"".join(permuted)
            if expected == data and shape[0] > 2:
                sys.exit("%s: the permutation moved nothing" % name)
        if out[2] != expected:
            sys.exit("%s: the exported bytes differ" % name)
    print("%d tensors match, wq and wk permuted to rotate-half" % len(tetra))


if __name__ == "__main__":
    main(*sys.argv[1:])
