#include "oomplan/report.hpp"

#include <fmt/format.h>

#include <iterator>

// plan_args: the command line after `oomplan` that plans `setup` again
// (DESIGN §2 fixes[].args). Only options that differ from their default are
// written, in DESIGN's table order, so a fix reads as "what changed". A tp or
// scheduler budget equal to what resolve_setup derives for the card is left
// out, as are max_model_len = seq and qlora's nf4.

namespace oomplan {
namespace {

// Quotes a word for a POSIX shell when it holds anything but safe characters.
std::string shell_word(const std::string& word) {
  const bool safe =
      !word.empty() && word.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                           "XYZ0123456789-_./:@+,=") == std::string::npos;
  if (safe) {
    return word;
  }
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

std::string plan_args(const std::string& model_arg, const Gpu& gpu,
                      const Setup& setup) {
  std::string out = shell_word(model_arg);
  auto add = [&out](std::string_view option, const auto& value) {
    fmt::format_to(std::back_inserter(out), " {} {}", option, value);
  };
  auto flag = [&out](std::string_view option) {
    out += ' ';
    out += option;
  };
  const Setup d;  // DESIGN §2 defaults
  // What resolve_setup derives when tp and the scheduler budget are left
  // unset; neither depends on the model (the setup's own seq and
  // max_model_len decide V0's budget), so an empty one stands in.
  Setup unset = setup;
  unset.tp = 0;
  unset.max_num_batched_tokens = 0;
  const Setup derived = resolve_setup(Model{}, gpu, unset);
  add("--gpus", fmt::format("{}x{}", setup.gpus, gpu.name));
  if (setup.nodes != d.nodes) {
    add("--nodes", setup.nodes);
  }
  if (setup.mode != d.mode) {
    add("--mode", mode_name(setup.mode));
  }
  if (setup.engine != d.engine) {
    add("--engine", engine_name(setup.engine));
  }
  if (setup.seq != d.seq) {
    add("--seq", setup.seq);
  }
  if (setup.batch != d.batch) {
    add("--batch", setup.batch);
  }
  if (setup.dtype != d.dtype) {
    add("--dtype", dtype_name(setup.dtype));
  }
  // resolve_setup turns `auto` into the checkpoint's format (none for 16-bit
  // checkpoints) and nf4 in qlora; `none` is therefore written only when the
  // caller asked for it explicitly (never by advise or fit).
  const bool default_quant =
      setup.quant == Quant::automatic || setup.quant == Quant::none ||
      (setup.mode == Mode::qlora && setup.quant == Quant::nf4);
  if (!default_quant) {
    add("--quant", quant_name(setup.quant));
  }
  if (setup.kv_dtype) {
    add("--kv-dtype", dtype_name(*setup.kv_dtype));
  }
  if (setup.tp != 0 && setup.tp != derived.tp) {
    add("--tp", setup.tp);
  }
  if (setup.pp != d.pp) {
    add("--pp", setup.pp);
  }
  if (setup.split_layers) {
    add("--split", "layers");
  }
  if (setup.sequence_parallel) {
    flag("--sequence-parallel");
  }
  if (setup.fsdp) {
    flag("--fsdp");
  } else if (setup.zero != d.zero) {
    add("--zero", setup.zero);
  }
  if (setup.offload != d.offload) {
    add("--offload", offload_name(setup.offload));
  }
  if (setup.checkpointing != d.checkpointing) {
    add("--checkpointing", checkpointing_name(setup.checkpointing));
  }
  if (setup.attn != d.attn) {
    add("--attn", attn_name(setup.attn));
  }
  if (setup.precision != d.precision) {
    add("--precision", precision_name(setup.precision));
  }
  if (setup.optimizer != d.optimizer) {
    add("--optimizer", optimizer_name(setup.optimizer));
  }
  if (setup.compile) {
    flag("--compile");
  }
  const bool lora = setup.mode == Mode::lora || setup.mode == Mode::qlora;
  if (lora && setup.lora_rank != d.lora_rank) {
    add("--lora-rank", setup.lora_rank);
  }
  if (lora && setup.lora_targets != d.lora_targets) {
    add("--lora-targets", lora_targets_text(setup.lora_targets));
  }
  if (setup.optimizer_in_bwd) {
    flag("--optimizer-in-bwd");
  }
  if (setup.loss != d.loss) {
    add("--loss", loss_name(setup.loss));
  }
  if (setup.activation_offload) {
    flag("--activation-offload");
  }
  if (setup.grad_accum != d.grad_accum) {
    add("--grad-accum", setup.grad_accum);
  }
  if (setup.engine == Engine::vllm) {
    if (setup.gpu_util != d.gpu_util) {
      add("--gpu-util", setup.gpu_util);
    }
    if (setup.enforce_eager) {
      flag("--enforce-eager");
    }
    if (setup.vllm_version != d.vllm_version) {
      add("--vllm-version", vllm_era_version(setup.vllm_version));
    }
    if (setup.max_num_batched_tokens != 0 &&
        setup.max_num_batched_tokens != derived.max_num_batched_tokens) {
      add("--max-num-batched-tokens", setup.max_num_batched_tokens);
    }
    if (setup.max_num_seqs != d.max_num_seqs) {
      add("--max-num-seqs", setup.max_num_seqs);
    }
  }
  if (setup.max_model_len != 0 && setup.max_model_len != setup.seq) {
    add("--max-model-len", setup.max_model_len);
  }
  if (setup.overhead_gib >= 0) {
    add("--overhead-gib", setup.overhead_gib);
  }
  if (setup.reserve >= 0) {
    add("--reserve", setup.reserve);
  }
  if (setup.price > 0) {
    add("--price", setup.price);
  }
  return out;
}

}  // namespace oomplan
