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

`--matrix` runs the issue-12 matrix (MATRIX below: HF generate, HF-Trainer-style full / LoRA /
QLoRA steps on Llama 3.2 1B / 3B and Llama 3.1 8B, checkpointing policies, long context) one
process per entry and writes tests/data/measured/DATE-GPU.json, which tests/test_validation.cpp
reads.
"""

import argparse
import datetime
import glob
import importlib.util
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
    p.add_argument("--checkpointing", default="none",
                   help="none, full, or every-N (block k, 1-based, wrapped when k %% N == 0, as torchtitan's "
                        "_apply_ac_to_transformer_block counts)")
    p.add_argument("--fsdp", action="store_true",
                   help="FSDP2 fully_shard on each decoder layer and the root over a one-rank process group "
                        "(torchtune's and torchtitan's wrapping); oomplan gets --fsdp --fsdp-version 2")
    p.add_argument("--use-reentrant", default="true", choices=["true", "false"],
                   help="gradient_checkpointing_kwargs use_reentrant (transformers' default: true)")
    p.add_argument("--loss", default="auto",
                   help="oomplan --loss for the plan; auto: from the installed transformers version "
                        "(<= 4.45 fp32-shift, 4.46-4.48 upcast-shift, >= 4.49 upcast)")
    p.add_argument("--prepare-kbit", action="store_true",
                   help="QLoRA: call peft.prepare_model_for_kbit_training (fp32 norms, embeddings, lm_head)")
    p.add_argument("--new-tokens", type=int, default=0,
                   help="infer: generate this many tokens after a prompt of --seq minus them (0: one prefill)")
    p.add_argument("--precision", default="pure", choices=["mixed", "pure", "amp"],
                   help="pure: weights, grads and AdamW states in --dtype; amp: fp32 weights under autocast "
                        "(HF Trainer bf16=True on an fp32 model); mixed (lora/qlora): PEFT's fp32 adapters "
                        "over a 16-bit base under autocast")
    p.add_argument("--optimizer", default="adamw",
                   choices=["adamw", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd"])
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", default="all")
    p.add_argument("--layers", type=int, default=0,
                   help="keep only this many decoder layers (to fit a small GPU); oomplan gets the same config")
    p.add_argument("--out", default=None, help="append the result to this JSON file (a list)")
    p.add_argument("--sweep", action="store_true", help="run the prepared sweep (see SWEEP below)")
    p.add_argument("--matrix", action="store_true", help="run the issue-12 matrix (see MATRIX below)")
    p.add_argument("--only", default=None,
                   help="with --matrix: run only entries whose text matches this regular expression")
    p.add_argument("--steps", type=int, default=2,
                   help="training steps (default 2: the optimizer states exist through the second step's "
                        "forward and backward, as in every step after the first)")
    p.add_argument("--sweep-out", default=None, help="where the sweep writes (default tests/data/measured/DATE-GPU.json)")
    p.add_argument("--jobs", type=int, default=1,
                   help="with --matrix/--sweep: run up to this many setups at once when their predicted device "
                        "bytes together stay under 70%% of the card (peaks are per process); a setup that runs "
                        "out of memory beside another is run again alone")
    p.add_argument("--deadline", type=float, default=0,
                   help="with --matrix/--sweep: start no setup after this many seconds (0: no limit)")
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
    """Exact versions of everything that changes the numbers, kept with them."""
    v = {"python": sys.version.split()[0]}
    for mod in ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "flash_attn", "trl"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # not installed
            v[mod] = None
    try:
        import torch
        v["cuda"] = torch.version.cuda
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        v["driver"] = out.stdout.strip().splitlines()[0] if out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        v["driver"] = None
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
        v["oomplan_commit"] = out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        v["oomplan_commit"] = None
    return v


def version_tuple(text):
    parts = []
    for piece in (text or "0").split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def loss_for_transformers(version):
    """oomplan --loss that matches transformers' causal-LM loss in a Trainer-style loop
    (outputs dropped before backward): <= 4.45 the model upcasts the logits and the loss shifts
    a copy, 4.46-4.48 ForCausalLMLoss upcasts and shifts a copy, >= 4.49 it pads the labels."""
    v = version_tuple(version)
    if v <= (4, 45):
        return "fp32-shift"
    if v <= (4, 48):
        return "upcast-shift"
    return "upcast"


def oomplan_args(args, config_dir, gpu):
    a = [config_dir, "--gpus", f"1x{gpu}", "--mode", args.mode, "--seq", str(args.seq),
         "--batch", str(args.batch), "--dtype", args.dtype, "--attn", args.attn]
    if args.mode != "infer":
        loss = args.loss
        if loss == "auto":
            loss = loss_for_transformers(versions_cache().get("transformers"))
        a += ["--checkpointing", args.checkpointing, "--precision", args.precision,
              "--optimizer", args.optimizer, "--loss", loss]
        if args.fsdp:
            a += ["--fsdp", "--fsdp-version", "2"]
        if args.prepare_kbit:
            a += ["--prepare-kbit"]
    if args.mode in ("lora", "qlora"):
        a += ["--lora-rank", str(args.lora_rank), "--lora-targets", args.lora_targets]
    return a


_VERSIONS = {}


def versions_cache():
    if not _VERSIONS:
        _VERSIONS.update(versions())
    return _VERSIONS


def predict(args, config_dir, gpu):
    cmd = [args.oomplan] + oomplan_args(args, config_dir, gpu) + ["--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        return {"error": out.stderr.strip(), "command": " ".join(cmd),
                "args": oomplan_args(args, "CONFIG", gpu)[1:]}
    plan = json.loads(out.stdout)
    peak = plan.get("peak", {})
    return {"allocated_bytes": peak.get("allocated_bytes"), "reserved_bytes": peak.get("reserved_bytes"),
            "device_bytes": peak.get("device_bytes", plan.get("total_bytes")), "phase": peak.get("phase"),
            "fits": plan.get("fits"), "components": {c["name"]: c["bytes"] for c in plan.get("components", [])},
            "command": " ".join(["oomplan"] + oomplan_args(args, "CONFIG", gpu)),
            "args": oomplan_args(args, "CONFIG", gpu)[1:]}


def lora_modules(text):
    if text in LORA_TARGETS:
        return LORA_TARGETS[text]
    return [LORA_SHORT[t] for t in text.split(",")]


def dtype_kwarg(transformers, dtype):
    """transformers >= 4.56 names the load dtype `dtype` (PR #39782; `torch_dtype` is kept only
    for backward compatibility), older releases `torch_dtype`."""
    return {"dtype" if version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype": dtype}


def checkpoint_every(text):
    """N of --checkpointing every-N, else 0."""
    return int(text[len("every-"):]) if text.startswith("every-") else 0


def decoder_layers(model):
    """The decoder blocks, found by class name (LlamaDecoderLayer, ...), in order."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


def apply_fsdp2(model):
    """FSDP2 over a one-rank process group: fully_shard on each decoder layer, then the root, as
    torchtune's shard_model and torchtitan's apply_fsdp wrap (torch.distributed.fsdp.fully_shard)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    if not dist.is_initialized():
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{29500 + os.getpid() % 2000}",
                                rank=0, world_size=1, device_id=torch.device("cuda", 0))
    for layer in decoder_layers(model):
        fully_shard(layer)
    fully_shard(model)
    return model


def build_model(args, cfg_dict, workdir):
    import torch
    import transformers

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    attn = {"eager": "eager", "sdpa": "sdpa", "flash": "flash_attention_2"}[args.attn]
    config = transformers.AutoConfig.for_model(**cfg_dict)
    if args.mode == "full" and args.precision == "mixed":
        raise SystemExit("measure.py: --precision mixed for full fine-tuning is DeepSpeed's 16-bit weights with an "
                         "fp32 master copy, which a plain loop does not reproduce; use --precision amp or pure")
    load_dtype = torch.float32 if args.precision == "amp" else dtype

    if args.mode == "qlora":
        # Random bf16 weights saved once on CPU, then loaded through bitsandbytes' NF4 path,
        # which is what a real QLoRA run does (embeddings and lm_head stay 16-bit).
        model = transformers.AutoModelForCausalLM.from_config(config, **dtype_kwarg(transformers, dtype))
        model.save_pretrained(workdir, safe_serialization=True)
        del model
        bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            workdir, quantization_config=bnb, attn_implementation=attn, device_map={"": 0},
            **dtype_kwarg(transformers, dtype))
    else:
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(
                config, attn_implementation=attn, **dtype_kwarg(transformers, load_dtype))

    if args.mode == "qlora" and args.prepare_kbit:
        import peft
        # Casts every non-4-bit parameter (embeddings, lm_head, norms) to fp32 and enables
        # input grads; gradient checkpointing is enabled below with the same kwargs.
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    if args.mode in ("lora", "qlora"):
        import peft
        lcfg = peft.LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, lora_dropout=0.0,
                               target_modules=lora_modules(args.lora_targets), task_type="CAUSAL_LM")
        # mixed: PEFT's default fp32 adapters (autocast_adapter_dtype=True, peft >= 0.12);
        # pure: adapters in the model dtype, as torchtune keeps them.
        try:
            model = peft.get_peft_model(model, lcfg, autocast_adapter_dtype=args.precision == "mixed")
        except TypeError:  # peft < 0.12 has no autocast_adapter_dtype: adapters follow the base
            model = peft.get_peft_model(model, lcfg)
    if args.checkpointing != "none" and args.mode != "infer":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": args.use_reentrant == "true"})
        if args.mode in ("lora", "qlora"):
            model.enable_input_require_grads()
        every = checkpoint_every(args.checkpointing)
        if every:
            # transformers' GradientCheckpointingLayer checkpoints a block whose
            # `gradient_checkpointing` is set: keep it on block k (1-based) when k % N == 0.
            for k, layer in enumerate(decoder_layers(model), start=1):
                if k % every:
                    layer.gradient_checkpointing = False
    if args.fsdp:
        model = apply_fsdp2(model)
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

        oom = False
        first_step = (0, 0)
        try:
            if args.mode == "infer":
                model.eval()
                with torch.no_grad():
                    if args.new_tokens > 0:
                        # HF generate: prefill of the prompt, then decode steps into the cache.
                        prompt = tokens[:, : max(1, args.seq - args.new_tokens)]
                        model.generate(input_ids=prompt, max_new_tokens=args.new_tokens,
                                       min_new_tokens=args.new_tokens, do_sample=False)
                    else:
                        # The prefill generate runs: logits for the last position only
                        # (generate passes logits_to_keep=1; transformers < 4.50 names it
                        # num_logits_to_keep).
                        import inspect
                        names = inspect.signature(model.forward).parameters
                        keep = {k: 1 for k in ("logits_to_keep", "num_logits_to_keep") if k in names}
                        model(input_ids=tokens, use_cache=True, **keep)
                phases["prefill"] = torch.cuda.max_memory_allocated()
            else:
                model.train()
                trainable = [p for p in model.parameters() if p.requires_grad]
                opt = make_optimizer(args, trainable)
                # HF Trainer (bf16=True) runs forward and loss under autocast: full AMP with fp32
                # weights (--precision mixed --mode full), PEFT's fp32 adapters over a 16-bit base
                # (--precision mixed, lora/qlora). pure: no autocast, as torchtune.
                autocast = args.precision in ("mixed", "amp") and args.dtype != "fp32"
                # --steps steps: the first allocates the optimizer states at its step, so only
                # from the second on do they live through forward and backward (the steady
                # state a plan prices). The peak is the largest over all steps.
                for step in range(1, args.steps + 1):
                    suffix = "" if step == 1 else f"_{step}"
                    with torch.autocast("cuda", dtype=torch.bfloat16 if args.dtype == "bf16" else torch.float16,
                                        enabled=autocast):
                        # Trainer.compute_loss keeps only the loss: the outputs (logits) are
                        # freed before backward.
                        loss = model(input_ids=tokens, labels=tokens).loss
                    phases["forward" + suffix] = torch.cuda.max_memory_allocated()
                    loss.backward()
                    phases["backward" + suffix] = torch.cuda.max_memory_allocated()
                    del loss
                    opt.step()
                    phases["optimizer_step" + suffix] = torch.cuda.max_memory_allocated()
                    opt.zero_grad(set_to_none=True)
                    if step == 1:
                        first_step = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
                        torch.cuda.reset_peak_memory_stats()
        except torch.cuda.OutOfMemoryError:
            oom = True
        torch.cuda.synchronize()
        measured = {"allocated_bytes": None if oom else max(first_step[0], torch.cuda.max_memory_allocated()),
                    "reserved_bytes": None if oom else max(first_step[1], torch.cuda.max_memory_reserved()),
                    "first_step_allocated_bytes": first_step[0] or None, "steps": args.steps,
                    "device_bytes": None if oom else nvidia_smi_process_bytes(),
                    "phase_bytes": phases, "oom": oom,
                    "capacity_bytes": torch.cuda.get_device_properties(0).total_memory}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def err(key):
        p, m = predicted.get(key), measured.get(key)
        return None if not p or not m else round((p - m) / m, 4)

    return {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(0),
            "oomplan_gpu": gpu, "model": args.model, "layers": args.layers or None,
            "setup": {k: getattr(args, k) for k in ("mode", "seq", "batch", "dtype", "attn", "checkpointing", "fsdp", "steps",
                                                     "use_reentrant", "precision", "optimizer", "lora_rank",
                                                     "lora_targets", "prepare_kbit", "new_tokens")},
            "config": cfg, "tolerance": 0.10 if args.mode == "infer" else 0.15,
            "versions": versions_cache(), "measured": measured, "predicted": predicted,
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


# The issue-12 matrix: what fits one H200 (141 GB). HF generate; HF-Trainer-style steps
# (transformers' own loss, outputs dropped before backward, autocast for PEFT's fp32 adapters);
# full / LoRA / QLoRA on Llama 3.2 1B, 3B and Llama 3.1 8B built from their config.json with
# random weights; checkpointing none / full (reentrant, HF's default, and not); long context
# under full checkpointing; eager vs SDPA. `--loss auto` picks oomplan's loss for the installed
# transformers. Entries that run out of memory are kept as OOM verdicts.
MATRIX = [
    # HF generate: prompt + 64 new tokens.
    ["llama-3.2-1b", "--mode", "infer", "--seq", "4096", "--new-tokens", "64"],
    ["llama-3.1-8b", "--mode", "infer", "--seq", "8192", "--new-tokens", "64"],
    ["llama-3.1-8b", "--mode", "infer", "--seq", "2048", "--batch", "8", "--new-tokens", "64"],
    # Full fine-tuning, bf16 weights and AdamW states (a Trainer on a bf16-loaded model).
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--checkpointing", "none"],
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--checkpointing", "full"],
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--checkpointing", "full", "--use-reentrant", "false"],
    ["llama-3.2-3b", "--mode", "full", "--seq", "4096", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "full", "--seq", "2048", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "full", "--seq", "4096", "--checkpointing", "full", "--optimizer", "adamw-8bit"],
    # torch AMP: fp32 weights under autocast (a Trainer on a model loaded in fp32).
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--precision", "amp", "--checkpointing", "none"],
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--precision", "amp", "--checkpointing", "full"],
    ["llama-3.2-3b", "--mode", "lora", "--seq", "4096", "--precision", "amp", "--checkpointing", "full"],
    # LoRA through PEFT: fp32 adapters under autocast (mixed) and adapters in bf16 (pure).
    ["llama-3.2-1b", "--mode", "lora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "none"],
    ["llama-3.2-3b", "--mode", "lora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "none",
     "--lora-targets", "qv"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--precision", "pure", "--checkpointing", "full"],
    # QLoRA: bitsandbytes NF4 + PEFT, with and without prepare_model_for_kbit_training.
    ["llama-3.2-3b", "--mode", "qlora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "qlora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "qlora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "full",
     "--prepare-kbit"],
    # Long context under full checkpointing.
    ["llama-3.2-1b", "--mode", "full", "--seq", "32768", "--checkpointing", "full"],
    ["llama-3.2-3b", "--mode", "lora", "--seq", "32768", "--precision", "mixed", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "16384", "--precision", "mixed", "--checkpointing", "full"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "32768", "--precision", "mixed", "--checkpointing", "full"],
    # Issue 28: HF generate at a third length and batch, a long prefill, the remaining
    # checkpointing policy (every 2nd block, as torchtitan counts), LoRA without checkpointing,
    # AMP against pure bf16 on 3B, and FSDP2 fully_shard on one GPU (torchtune's wrapping).
    ["llama-3.2-3b", "--mode", "infer", "--seq", "16384", "--batch", "2", "--new-tokens", "64"],
    ["llama-3.1-8b", "--mode", "infer", "--seq", "32768"],
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--checkpointing", "every-2"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "every-2"],
    ["llama-3.2-3b", "--mode", "lora", "--seq", "4096", "--precision", "mixed", "--checkpointing", "none"],
    ["llama-3.2-3b", "--mode", "full", "--seq", "4096", "--precision", "amp", "--checkpointing", "full"],
    ["llama-3.2-1b", "--mode", "full", "--seq", "4096", "--checkpointing", "full", "--use-reentrant", "false",
     "--fsdp"],
    ["llama-3.2-3b", "--mode", "full", "--seq", "4096", "--checkpointing", "full", "--use-reentrant", "false",
     "--fsdp"],
    ["llama-3.1-8b", "--mode", "lora", "--seq", "4096", "--precision", "pure", "--checkpointing", "full",
     "--use-reentrant", "false", "--fsdp"],
    # Eager attention's s^2 scores against SDPA.
    ["llama-3.2-1b", "--mode", "full", "--seq", "2048", "--attn", "eager", "--checkpointing", "none"],
    ["llama-3.2-1b", "--mode", "full", "--seq", "2048", "--attn", "sdpa", "--checkpointing", "none"],
]


def needs_bitsandbytes(entry):
    return "qlora" in entry or any(e.endswith("8bit") or e.startswith("paged") for e in entry)


def predicted_device_bytes(entry, args, gpu):
    """oomplan's device bytes for an entry (0 when it cannot say): what the scheduler admits by."""
    try:
        sub = parse_args(entry + ["--oomplan", args.oomplan, "--gpu", gpu])
        cfg = hf_config_dict(sub.model)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f)
            return predict(sub, d, gpu).get("device_bytes") or 0
    except Exception:  # a prediction that fails is measured alone
        return 0


def run_list(entries, args, out, gpu):
    """Runs each entry in its own process (allocator state and peaks do not leak between runs),
    up to --jobs at once while their predicted device bytes stay under 70 % of the card, and
    rewrites `out` after each one. An OOM beside another run is measured again alone."""
    import time
    import torch
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    capacity = torch.cuda.get_device_properties(0).total_memory
    have_bnb = importlib.util.find_spec("bitsandbytes") is not None
    started = time.monotonic()
    results = [None] * len(entries)
    queue = []  # (index, entry, predicted bytes, alone)
    for i, entry in enumerate(entries):
        if needs_bitsandbytes(entry) and not have_bnb:
            results[i] = {"args": entry, "entry": entry, "skipped": "bitsandbytes is not installed"}
            continue
        need = predicted_device_bytes(entry, args, gpu)
        queue.append((i, entry, need, need == 0))
    running = {}  # Popen -> {"i", "entry", "need", "alone", "out", "err", "shared"}

    def write():
        with open(out, "w") as f:
            json.dump({"schema": "oomplan.measured/1", "date": datetime.date.today().isoformat(),
                       "gpu": gpu, "versions": versions_cache(), "results": [r for r in results if r]}, f, indent=1)

    while queue or running:
        late = args.deadline and time.monotonic() - started > args.deadline
        while queue and not late and len(running) < max(1, args.jobs):
            i, entry, need, alone = queue[0]
            used = sum(r["need"] for r in running.values())
            if running and (alone or any(r["alone"] for r in running.values()) or used + need > 0.7 * capacity):
                break
            queue.pop(0)
            for r in running.values():
                r["shared"] = True
            cmd = [sys.executable, os.path.abspath(__file__)] + entry + ["--oomplan", args.oomplan, "--gpu", gpu]
            run = {"i": i, "entry": entry, "need": need, "alone": alone, "shared": bool(running),
                   "out": tempfile.TemporaryFile(mode="w+"), "err": tempfile.TemporaryFile(mode="w+")}
            running[subprocess.Popen(cmd, stdout=run["out"], stderr=run["err"], text=True)] = run
        if late and queue:
            for i, entry, _, _ in queue:
                results[i] = {"args": entry, "entry": entry, "skipped": f"not started: --deadline {args.deadline} s"}
            queue = []
        time.sleep(0.2)
        for proc in [p for p in running if p.poll() is not None]:
            run = running.pop(proc)
            run["out"].seek(0)
            run["err"].seek(0)
            entry = run["entry"]
            if proc.returncode != 0:
                results[run["i"]] = {"args": entry, "entry": entry, "failed": run["err"].read()[-3000:]}
            else:
                result = json.loads(run["out"].read())
                result["entry"] = entry
                if result["measured"].get("oom") and run["shared"]:
                    # Out of memory beside another run: measured again, alone.
                    queue.insert(0, (run["i"], entry, run["need"], True))
                    print(f"{' '.join(entry)}: oom beside another run, queued alone", file=sys.stderr)
                    continue
                results[run["i"]] = result
            write()
            print(f"{' '.join(entry)}: {'failed' if proc.returncode else 'ok'} at "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    write()
    print(out)


def main(argv=None):
    args = parse_args(argv)
    if not args.sweep and not args.matrix:
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
    entries = MATRIX if args.matrix else SWEEP
    if args.only:
        import re
        entries = [e for e in entries if re.search(args.only, " ".join(e))]
    run_list(entries, args, out, gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
