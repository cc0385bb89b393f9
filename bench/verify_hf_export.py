#!/usr/bin/env python3
"""Checks a `tetra export --format hf` directory with Hugging Face
`transformers`: LlamaForCausalLM.from_pretrained(EXPORT) in fp32 (TF32 off,
eager attention) computes the mean cross-entropy of the batches that
`tetra eval --dump-batches BATCHES` wrote, and compares it with Tetra's eval
loss on them (the file's metadata). Exit 0 when the relative difference is
at most --tolerance (default 1e-4).

  python3 bench/verify_hf_export.py EXPORT BATCHES [--tolerance T]

Needs torch, transformers and safetensors (the GPU machine has them); runs
on CUDA when there is one. docs/tools/export.md shows a run.
"""

import argparse
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from transformers import LlamaForCausalLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("export")
    parser.add_argument("batches")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with safe_open(args.batches, "pt") as f:
        tetra_loss = float(f.metadata()["eval_loss"])
        tokens = f.get_tensor("tokens").long()
        targets = f.get_tensor("targets").long()
    model = LlamaForCausalLM.from_pretrained(
        args.export, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    losses = []
    with torch.no_grad():
        for b in range(tokens.shape[0]):
            logits = model(tokens[b].to(device)).logits.float()
            losses.append(F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                targets[b].to(device).reshape(-1)).item())
    loss = sum(losses) / len(losses)
    try:  # the tokenizer's files load (a byte-vocabulary model has none)
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(args.export)
        print("%s: tokenizer %s, %d tokens; the first batch's first row "
              "reads %r" % (args.export, type(tokenizer).__name__,
                            len(tokenizer), tokenizer.decode(tokens[0, 0, :12])))
    except (OSError, ValueError) as error:
        print("%s: no tokenizer (%s)" % (args.export, str(error).splitlines()[0]))
    relative = abs(loss - tetra_loss) / abs(tetra_loss)
    ok = relative <= args.tolerance
    print("%s: transformers %.7f, tetra %.7f, relative difference %.2e "
          "(%d batches of %d x %d, %s) %s"
          % (args.export, loss, tetra_loss, relative, tokens.shape[0],
             tokens.shape[1], tokens.shape[2], device,
             "ok" if ok else "ABOVE %.0e" % args.tolerance))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
