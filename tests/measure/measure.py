#!/usr/bin/env python3
"""Measure real GPU memory for one oomplan setup and print it next to oomplan's plan.

Builds the model from a catalog entry (models/*.json) or a Hugging Face config.json with
random weights (nothing is downloaded), runs one prefill (--mode infer) or one training step
(full / lora / qlora), and prints one JSON document:

  {"setup": {...}, "gpu": "...", "versions": {...},
   "measured":  {"allocated_bytes": ..., "reserved_bytes": ..., "device_bytes": ..., "phase_bytes": {...}},
   "predicted": {"allocated_bytes": ..., "reserved_bytes": ..., "device_bytes": ..., "phase": ...,
                 "components": {...}},
   "error": {"allocated": 0.03, "reserved": ..., "device": ...}}

`allocated` is torch.cuda.max_memory_allocated(), `reserved` max_memory_reserved(), `device`
what nvidia-smi shows for this process after the step (the caching allocator keeps what it
reserved, so this is the reserved peak plus the CUDA context and library workspaces).

Needs PyTorch with CUDA, transformers, and for LoRA/QLoRA peft (and bitsandbytes for QLoRA and
the bitsandbytes optimizers). See tests/measure/README.md.
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Catalog keys that are oomplan's own, not Hugging Face config fields.
NON_HF_KEYS = {
    "id", "hf_id", "aliases", "params", "params_active", "official_params",
    "official_params_source", "checkpoint_bytes", "sources", "note", "notes", "common",
    "checkpoint_quant", "checkpoint_dtype", "extra_params",
}

LORA_TARGETS = {
    "qv": ["q_proj", "v_proj"],
    "attn": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "all": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
LORA_SHORT = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
              "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="catalog name/alias (models/*.json) or a path to config.json or its folder")
    p.add_argument("--gpu", default=None, help="oomplan GPU name (default: guessed from the device name)")
    p.add_argument("--oomplan", default=os.path.join(REPO, "build", "oomplan"), help="oomplan binary")
    p.add_argument("--mode", default="full", choices=["infer", "full", "lora", "qlora"])
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--attn", default="sdpa", choices=["eager", "sdpa", "flash"])
    p.add_argument("--checkpointing", default="none", choices=["none", "full"])
    p.add_argument("--precision", default="pure", choices=["mixed", "pure"],
                   help="pure: weights, grads and AdamW states in --dtype; mixed: fp32 weights under autocast")
    p.add_argument("--optimizer", default="adamw",
                   choices=["adamw", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd"])
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", default="all")
    p.add_argument("--layers", type=int, default=0,
                   help="keep only this many decoder layers (to fit a small GPU); oomplan gets the same config")
    p.add_argument("--out", default=None, help="append the result to this JSON file (a list)")
    p.add_argument("--sweep", action="store_true", help="run the prepared sweep (see SWEEP below)")
    p.add_argument("--sweep-out", default=None, help="where the sweep writes (default tests/data/measured/DATE-GPU.json)")
    return p.parse_args(argv)


def load_catalog_entry(name):
    """The catalog entry whose id, hf_id or alias is `name` (case-insensitive)."""
    want = name.lower()
    for path in sorted(glob.glob(os.path.join(REPO, "models", "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        for m in doc.get("models", []):
            names = [m.get("id", ""), m.get("hf_id", "")] + list(m.get("aliases", []))
            if want in (n.lower() for n in names):
                return m
    raise SystemExit(f"measure.py: unknown model '{name}' (not in models/*.json); pass a config.json path")


def hf_config_dict(model_arg):
    """A Hugging Face config dict for `model_arg` (catalog entry or config.json path)."""
    if os.path.isdir(model_arg):
        model_arg = os.path.join(model_arg, "config.json")
    if os.path.isfile(model_arg):
        with open(model_arg) as f:
            return json.load(f)
    entry = load_catalog_entry(model_arg)
    return {k: v for k, v in entry.items() if k not in NON_HF_KEYS}


def layer_key(cfg):
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in cfg:
            return key
    return "num_hidden_layers"


def guess_gpu(torch):
    name = torch.cuda.get_device_name(0)
    total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    for key, oom in (("H200", "H200"), ("H100", "H100"), ("A100", "A100-80" if total_gib > 60 else "A100-40"),
                     ("L40S", "L40S"), ("4090", "RTX4090"), ("A6000", "rtx-a6000"), ("L4", "L4"),
                     ("A10", "A10G")):
        if key in name:
            return oom
    return name


def nvidia_smi_process_bytes():
    """Memory nvidia-smi attributes to this process, in bytes (None when unavailable)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()):
            return int(float(parts[1])) * 2**20  # MiB
    return None


def versions():
    v = {"python": sys.version.split()[0]}
    for mod in ("torch", "transformers", "peft", "bitsandbytes", "accelerate"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # not installed
            v[mod] = None
    try:
        import torch
        v["cuda"] = torch.version.cuda
    except Exception:
        pass
    return v


def oomplan_args(args, config_dir, gpu):
    a = [config_dir, "--gpus", f"1x{gpu}", "--mode", args.mode, "--seq", str(args.seq),
         "--batch", str(args.batch), "--dtype", args.dtype, "--attn", args.attn, "--json"]
    if args.mode != "infer":
        a += ["--checkpointing", args.checkpointing, "--precision", args.precision,
              "--optimizer", args.optimizer]
    if args.mode in ("lora", "qlora"):
        a += ["--lora-rank", str(args.lora_rank), "--lora-targets", args.lora_targets]
    return a


def predict(args, config_dir, gpu):
    cmd = [args.oomplan] + oomplan_args(args, config_dir, gpu)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        return {"error": out.stderr.strip(), "command": " ".join(cmd)}
    plan = json.loads(out.stdout)
    peak = plan.get("peak", {})
    return {"allocated_bytes": peak.get("allocated_bytes"), "reserved_bytes": peak.get("reserved_bytes"),
            "device_bytes": peak.get("device_bytes", plan.get("total_bytes")), "phase": peak.get("phase"),
            "fits": plan.get("fits"), "components": {c["name"]: c["bytes"] for c in plan.get("components", [])},
            "command": " ".join(["oomplan"] + oomplan_args(args, "CONFIG", gpu))}


def lora_modules(text):
    if text in LORA_TARGETS:
        return LORA_TARGETS[text]
    return [LORA_SHORT[t] for t in text.split(",")]


def build_model(args, cfg_dict, workdir):
    import torch
    import transformers

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    attn = {"eager": "eager", "sdpa": "sdpa", "flash": "flash_attention_2"}[args.attn]
    config = transformers.AutoConfig.for_model(**cfg_dict)
    load_dtype = torch.float32 if (args.mode == "full" and args.precision == "mixed") else dtype

    if args.mode == "qlora":
        # Random bf16 weights saved once on CPU, then loaded through bitsandbytes' NF4 path,
        # which is what a real QLoRA run does (embeddings and lm_head stay 16-bit).
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
        model.save_pretrained(workdir, safe_serialization=True)
        del model
        bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            workdir, quantization_config=bnb, torch_dtype=dtype, attn_implementation=attn, device_map={"": 0})
    else:
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(
                config, torch_dtype=load_dtype, attn_implementation=attn)

    if args.mode in ("lora", "qlora"):
        import peft
        lcfg = peft.LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, lora_dropout=0.0,
                               target_modules=lora_modules(args.lora_targets), task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lcfg)
    if args.checkpointing == "full" and args.mode != "infer":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if args.mode in ("lora", "qlora"):
            model.enable_input_require_grads()
    return model


def make_optimizer(args, params):
    import torch
    if args.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-5, fused=True)
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9)
    import bitsandbytes as bnb
    return {"adamw-8bit": bnb.optim.AdamW8bit, "paged-adamw": bnb.optim.PagedAdamW,
            "paged-adamw-8bit": bnb.optim.PagedAdamW8bit}[args.optimizer](params, lr=1e-5)


def run_one(args):
    import torch

    cfg = hf_config_dict(args.model)
    if args.layers > 0:
        cfg[layer_key(cfg)] = args.layers
    gpu = args.gpu or guess_gpu(torch)
    workdir = tempfile.mkdtemp(prefix="oomplan-measure-")
    try:
        config_dir = os.path.join(workdir, "config")
        os.makedirs(config_dir)
        with open(os.path.join(config_dir, "config.json"), "w") as f:
            json.dump(cfg, f)
        predicted = predict(args, config_dir, gpu)

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        model = build_model(args, cfg, os.path.join(workdir, "weights"))
        phases = {"load": torch.cuda.max_memory_allocated()}
        torch.cuda.reset_peak_memory_stats()
        vocab = cfg.get("vocab_size", 32000)
        tokens = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")

        if args.mode == "infer":
            model.eval()
            with torch.no_grad():
                model(input_ids=tokens, use_cache=True)
            phases["prefill"] = torch.cuda.max_memory_allocated()
        else:
            model.train()
            trainable = [p for p in model.parameters() if p.requires_grad]
            opt = make_optimizer(args, trainable)
            autocast = args.precision == "mixed" and args.dtype != "fp32"
            with torch.autocast("cuda", dtype=torch.bfloat16 if args.dtype == "bf16" else torch.float16,
                                enabled=autocast):
                out = model(input_ids=tokens, labels=tokens)
            phases["forward"] = torch.cuda.max_memory_allocated()
            out.loss.backward()
            phases["backward"] = torch.cuda.max_memory_allocated()
            del out
            opt.step()
            phases["optimizer_step"] = torch.cuda.max_memory_allocated()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        measured = {"allocated_bytes": torch.cuda.max_memory_allocated(),
                    "reserved_bytes": torch.cuda.max_memory_reserved(),
                    "device_bytes": nvidia_smi_process_bytes(),
                    "phase_bytes": phases}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def err(key):
        p, m = predicted.get(key), measured.get(key)
        return None if not p or not m else round((p - m) / m, 4)

    return {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(0),
            "oomplan_gpu": gpu, "model": args.model, "layers": args.layers or None,
            "setup": {k: getattr(args, k) for k in ("mode", "seq", "batch", "dtype", "attn", "checkpointing",
                                                     "precision", "optimizer", "lora_rank", "lora_targets")},
            "versions": versions(), "measured": measured, "predicted": predicted,
            "error": {"allocated": err("allocated_bytes"), "reserved": err("reserved_bytes"),
                      "device": err("device_bytes")}}


# The prepared sweep (issue 3 §7): 8B full with and without checkpointing, LoRA, QLoRA, long
# sequences, eager vs sdpa, and one prefill. Each entry is a list of command-line arguments.
SWEEP = [
    ["llama-3.1-8b", "--mode", "full", "--seq", "2048", "--checkpointing", "none"],
    ["llama-3.1-8b", "--mode", "full", "--seq", "2048", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "full", "--seq", "8192", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--checkpointing", "full", "--lora-targets", "all"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--checkpointing", "none", "--lora-targets", "qv"],
    ["llama-3.1-8b", "--mode", "qlora", "--seq", "4096", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "16384", "--checkpointing", "full"],
    ["llama-3.2-3b", "--mode", "full", "--seq", "2048", "--attn", "eager", "--checkpointing", "none"],
    ["llama-3.2-3b", "--mode", "full", "--seq", "2048", "--attn", "sdpa", "--checkpointing", "none"],
    ["llama-3.1-8b", "--mode", "infer", "--seq", "8192"],
]


def main(argv=None):
    args = parse_args(argv)
    if not args.sweep:
        result = run_one(args)
        print(json.dumps(result, indent=1))
        if args.out:
            rows = json.load(open(args.out)) if os.path.exists(args.out) else []
            rows.append(result)
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
        return 0

    import torch
    gpu = args.gpu or guess_gpu(torch)
    out = args.sweep_out or os.path.join(REPO, "tests", "data", "measured",
                                         f"{datetime.date.today().isoformat()}-{gpu}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    results = []
    for entry in SWEEP:
        # One process per setup, so allocator state and peaks do not leak between runs.
        cmd = [sys.executable, os.path.abspath(__file__)] + entry + ["--oomplan", args.oomplan, "--gpu", gpu]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            results.append({"args": entry, "failed": run.stderr[-2000:]})
        else:
            results.append(json.loads(run.stdout))
        with open(out, "w") as f:
            json.dump({"schema": "oomplan.measured/1", "results": results}, f, indent=1)
        print(f"{' '.join(entry)}: {'failed' if run.returncode else 'ok'}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
