// Launch writers (launch.hpp write_launch): a resolved setup -> the files and
// command lines of one framework, spelled as the readers beside them read
// them (vllm.cpp, deepspeed.cpp, hf_trainer.cpp, fsdp.cpp, accelerate.cpp),
// so that `oomplan check` plans the written files as the same setup
// (tests/test_launch_roundtrip.cpp). Every setting that changes memory is
// written; one the framework cannot express goes to `unwritten`.

#include "launch/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/launch/launch.hpp"
#include "oomplan/util/release.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

namespace oomplan {
namespace {

using launch::Json;

// The files the blocks are, as the launch commands name them.
constexpr std::string_view k_ds_file = "ds_config.json";
constexpr std::string_view k_args_file = "train_args.json";
constexpr std::string_view k_accelerate_file = "accelerate_config.yaml";

struct Out {
  LaunchWriting w;
  void cannot(std::string what) { w.unwritten.push_back(std::move(what)); }
};

// The training arguments' file: ORPOConfig has no key of its own, so an
// ORPO job's file names its trainer (`trl orpo --config orpo_args.json`).
std::string args_file(const Resolved& s) {
  return s.objective == TrainObjective::orpo ? "orpo_args.json"
                                             : std::string(k_args_file);
}

std::string model_id(const Model& model) {
  return model.hf_id.empty() ? model.name : model.hf_id;
}

// Checkpoints whose config.json auto_map names their own modeling code, for a
// model_type transformers does not ship: from_pretrained and vLLM load them
// only with trust_remote_code (InternLM2: modeling_internlm2.py; Kimi K2:
// modeling_deepseek.py, as vLLM's Kimi-K2 recipe passes --trust-remote-code).
bool remote_code(const Model& model) {
  constexpr std::array<std::string_view, 2> k_types = {"internlm2", "kimi_k2"};
  return std::find(k_types.begin(), k_types.end(), model.model_type) !=
         k_types.end();
}

// The key every training file that loads the model spells it with (TRL
// ModelConfig, run_clm.py, axolotl, LLaMA-Factory ModelArguments).
void remote_code_key(const Model& model, Json& doc) {
  if (remote_code(model)) {
    doc["trust_remote_code"] = true;
  }
}

// Quantized weights other than the checkpoint's own (which loading the
// checkpoint gives).
bool own_quant(const Resolved& s, const Model& model) {
  return s.quant == model.checkpoint_quant;
}

// ---- vLLM: `vllm serve MODEL` flags (vllm/engine/arg_utils.py EngineArgs).

std::string_view vllm_dtype(Dtype d) {
  return d == Dtype::fp16   ? "float16"
         : d == Dtype::fp32 ? "float32"
                            : "bfloat16";
}

// QUANTIZATION_METHODS names (vllm/model_executor/layers/quantization).
std::optional<std::string_view> vllm_quant(Quant q) {
  switch (q) {
    case Quant::awq:
      return "awq";
    case Quant::gptq:
      return "gptq";
    case Quant::fp8:
      return "fp8";
    case Quant::mxfp4:
      return "mxfp4";
    case Quant::nf4_nodq:
      return "bitsandbytes";
    default:
      return std::nullopt;
  }
}

void write_vllm(const Resolved& s, const Model& model, Out& out) {
  if (s.training()) {
    out.cannot("training: vLLM serves, it does not train");
    return;
  }
  std::string cmd = fmt::format("vllm serve {}", model_id(model));
  if (remote_code(model)) {
    cmd += " --trust-remote-code";
  }
  cmd += fmt::format(" --tensor-parallel-size {}", s.tp);
  if (s.pp > 1) {
    cmd += fmt::format(" --pipeline-parallel-size {}", s.pp);
  }
  if (s.dp() > 1) {
    cmd += fmt::format(" --data-parallel-size {}", s.dp());
  }
  if (s.cp > 1 || s.split_layers) {
    out.cannot(
        "context parallelism or device_map layer splitting: vLLM "
        "shards by tensor, pipeline and data parallelism "
        "(vllm/config/parallel.py)");
  }
  cmd += fmt::format(" --dtype {}", vllm_dtype(s.dtype));
  if (!own_quant(s, model)) {
    if (const auto q = vllm_quant(s.quant)) {
      cmd += fmt::format(" --quantization {}", *q);
    } else {
      out.cannot(
          fmt::format("{} weights: no vLLM quantization method loads "
                      "them from this checkpoint",
                      quant_name(s.quant)));
    }
  }
  if (s.kv_dtype == Dtype::fp8) {
    cmd += " --kv-cache-dtype fp8";  // vllm/config/cache.py CacheDType
  } else if (s.kv_dtype != s.dtype) {
    out.cannot("a KV cache dtype other than the model's or fp8");
  }
  cmd += fmt::format(" --gpu-memory-utilization {}",
                     launch::number_text(s.gpu_util));
  cmd += fmt::format(" --max-model-len {}", s.max_model_len);
  cmd += fmt::format(" --max-num-seqs {}", s.max_num_seqs);
  cmd += fmt::format(" --max-num-batched-tokens {}", s.max_num_batched_tokens);
  if (s.enforce_eager) {
    cmd += " --enforce-eager";
  }
  out.w.blocks.push_back({"vLLM", cmd, ""});
}

// ---- transformers generate: from_pretrained arguments (no reader).

// The GPTQConfig that loads a GPTQ checkpoint with the plan's kernel: its
// loading attributes join the checkpoint's quantization_config
// (transformers utils/quantization_config.py GPTQConfig). Before 4.49
// AutoGPTQ through optimum: exllama_config {"version": 1} (the default) or
// 2, use_exllama=False for cuda-old; from 4.49 GPTQModel's backend names.
std::optional<std::string> gptq_config(const Resolved& s, Out& out) {
  const bool gptqmodel = s.transformers_release >= k_transformers_gptqmodel;
  if (!gptqmodel) {
    switch (s.gptq_kernel) {
      case GptqKernel::exllama:
        return "GPTQConfig(bits=4)";
      case GptqKernel::exllamav2:
        return R"(GPTQConfig(bits=4, exllama_config={"version": 2}))";
      case GptqKernel::cuda_old:
        return "GPTQConfig(bits=4, use_exllama=False)";
      default:
        out.cannot(fmt::format(
            "the {} GPTQ kernel: GPTQModel's, which transformers loads from "
            "4.49",
            gptq_kernel_name(s.gptq_kernel)));
        return std::nullopt;
    }
  }
  switch (s.gptq_kernel) {
    case GptqKernel::exllama:
      return R"(GPTQConfig(bits=4, backend="exllama_v1"))";
    case GptqKernel::exllamav2:
      return R"(GPTQConfig(bits=4, backend="exllama_v2"))";
    case GptqKernel::cuda_old:
      out.cannot(
          "AutoGPTQ's cuda-old GPTQ kernel: transformers before 4.49 "
          "(use_exllama=False)");
      return std::nullopt;
    default:
      return fmt::format(R"(GPTQConfig(bits=4, backend="{}"))",
                         gptq_kernel_name(s.gptq_kernel));
  }
}

void write_generate(const Resolved& s, const Model& model, Out& out) {
  if (s.training()) {
    out.cannot("training: model.generate runs inference");
    return;
  }
  std::string args =
      fmt::format(R"("{}", torch_dtype=torch.{})", model_id(model),
                  s.dtype == Dtype::fp16   ? "float16"
                  : s.dtype == Dtype::fp32 ? "float32"
                                           : "bfloat16");
  if (s.gptq_kernel != GptqKernel::none && own_quant(s, model)) {
    if (const auto config = gptq_config(s, out)) {
      args += ", quantization_config=" + *config;
    }
  } else if (s.awq_fused_len > 0 && own_quant(s, model)) {
    // transformers' AwqConfig loads AutoAWQ's fused modules
    // (integrations/awq.py fuse_awq_modules).
    args += fmt::format(
        ", quantization_config=AwqConfig(bits=4, do_fuse=True, "
        "fuse_max_seq_len={})",
        s.awq_fused_len);
  } else if (!own_quant(s, model)) {
    // transformers quantizers (transformers/quantizers/auto.py).
    switch (s.quant) {
      case Quant::int8:
        args += ", quantization_config=BitsAndBytesConfig(load_in_8bit=True)";
        break;
      case Quant::fp8:
        args += ", quantization_config=FbgemmFp8Config()";
        break;
      case Quant::nf4:
      case Quant::nf4_nodq:
        args += fmt::format(
            R"(, quantization_config=BitsAndBytesConfig(load_in_4bit=True, )"
            R"(bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant={}))",
            s.quant == Quant::nf4 ? "True" : "False");
        break;
      default:
        out.cannot(fmt::format("{} weights from this checkpoint",
                               quant_name(s.quant)));
    }
  }
  args += fmt::format(R"(, attn_implementation="{}")",
                      s.attn == Attn::flash  ? "flash_attention_2"
                      : s.attn == Attn::sdpa ? "sdpa"
                                             : "eager");
  if (remote_code(model)) {
    args += ", trust_remote_code=True";
  }
  if (s.split_layers) {
    args += R"(, device_map="auto")";  // accelerate big_modeling dispatch
  } else if (s.tp > 1) {
    if (remote_code(model)) {
      // Tensor parallelism follows the model class's base_model_tp_plan
      // (modeling_utils.py); remote modeling code declares none.
      out.cannot(fmt::format(
          "tensor parallelism: {}'s own modeling code (trust_remote_code) "
          "has no tp_plan",
          model.model_type));
    } else if (s.transformers_release < k_transformers_tp_plan) {
      out.cannot(fmt::format(
          "tensor parallelism: transformers {} has no tp_plan (4.47+)",
          release_text(s.transformers_release)));
    } else if (s.transformers_release < k_transformers_distributed_config) {
      args += R"(, tp_plan="auto")";
    } else {
      args += fmt::format(", distributed_config=DistributedConfig(tp_size={})",
                          s.tp);
    }
  }
  if (s.kv_dtype != s.dtype) {
    out.cannot(
        "a KV cache dtype other than the model's: DynamicCache keeps "
        "the model's dtype");
  }
  out.w.blocks.push_back({"transformers",
                          "AutoModelForCausalLM.from_pretrained(" + args + ")",
                          ""});
  if (s.tp > 1 && !s.split_layers) {
    out.w.blocks.push_back(
        {"torchrun", fmt::format("--nproc_per_node {}", s.gpus), ""});
  }
}

// ---- DeepSpeed JSON (deepspeed/runtime/config.py, zero/config.py,
// zero/offload_config.py).

Json deepspeed_doc(const Resolved& s) {
  Json zero = {{"stage", s.zero}};
  const Json cpu = {{"device", "cpu"}, {"pin_memory", true}};
  if (s.offload == Offload::optimizer || s.offload == Offload::all) {
    zero["offload_optimizer"] = cpu;
  }
  if (s.offload == Offload::params || s.offload == Offload::all) {
    zero["offload_param"] = cpu;
  }
  Json doc = {{"zero_optimization", zero}};
  doc["bf16"] = {{"enabled", s.dtype == Dtype::bf16}};
  doc["fp16"] = {{"enabled", s.dtype == Dtype::fp16}};
  doc["train_micro_batch_size_per_gpu"] = s.batch;
  doc["gradient_accumulation_steps"] = s.grad_accum;
  return doc;
}

void deepspeed_limits(const Resolved& s, Out& out) {
  if (s.offload == Offload::params && s.zero < 3) {
    out.cannot(
        "parameter offload below ZeRO-3: offload_param applies only "
        "at stage 3 (deepspeed/runtime/zero/stage3.py)");
  }
  if (s.offload != Offload::none && s.zero == 0) {
    out.cannot("offload without ZeRO: offload_optimizer needs stage >= 1");
  }
  if (s.precision == Precision::pure) {
    out.cannot(
        "pure bf16: DeepSpeed keeps fp32 master weights "
        "(deepspeed/runtime/bf16_optimizer.py)");
  }
}

// ---- HF TrainingArguments / TRL SFTConfig (transformers training_args.py,
// trl/trainer/sft_config.py, model_config.py), as a JSON args file.

std::string_view hf_optim(Optimizer o) {
  switch (o) {
    case Optimizer::adamw:
      return "adamw_torch";
    case Optimizer::adamw_8bit:
      return "adamw_bnb_8bit";
    case Optimizer::paged_adamw:
      return "paged_adamw_32bit";
    case Optimizer::paged_adamw_8bit:
      return "paged_adamw_8bit";
    case Optimizer::sgd:
      return "sgd";
    case Optimizer::adafactor:
      return "adafactor";
  }
  return "adamw_torch";
}

// PEFT target_modules for --lora-targets, in the names the model's family
// gives them (lora_modules.cpp); a fused module is adapted whole, so part of
// one cannot be written.
Json lora_modules(unsigned targets, const Model& model, Out& out) {
  Json names = Json::array();
  for (const launch::LoraModule& m :
       launch::lora_modules_of(model.model_type)) {
    const unsigned covered = targets & m.targets;
    if (covered == 0) {
      continue;
    }
    names.push_back(m.name);
    if (covered != m.targets) {
      out.cannot(fmt::format(
          "LoRA on part of {}: {} fuses those projections in one module, "
          "which PEFT adapts whole",
          m.name, model.model_type));
    }
  }
  return names;
}

// The model, adapters and quantization keys (TRL ModelConfig).
void hf_model_keys(const Resolved& s, const Model& model, Json& doc, Out& out) {
  doc["model_name_or_path"] = model_id(model);
  remote_code_key(model, doc);
  if (s.mode == Mode::full) {
    if (!own_quant(s, model)) {
      out.cannot("quantized weights in a full fine-tune");
    }
    return;
  }
  doc["use_peft"] = true;
  doc["lora_r"] = s.lora_rank;
  doc["lora_dropout"] = s.lora_dropout;
  doc["lora_target_modules"] = lora_modules(s.lora_targets, model, out);
  if (s.mode == Mode::qlora) {
    doc["load_in_4bit"] = true;
    doc["use_bnb_nested_quant"] = s.quant == Quant::nf4;
    if (s.quant != Quant::nf4 && s.quant != Quant::nf4_nodq) {
      out.cannot(
          fmt::format("QLoRA over {} weights: TRL loads the base "
                      "with bitsandbytes NF4",
                      quant_name(s.quant)));
    }
  } else if (s.quant == Quant::int8) {
    doc["load_in_8bit"] = true;
  } else if (!own_quant(s, model)) {
    out.cannot(fmt::format("LoRA over {} weights", quant_name(s.quant)));
  }
}

// What TrainingArguments cannot express at all.
void hf_limits(const Resolved& s, bool trl, Out& out) {
  if (s.tp > 1 || s.pp > 1 || s.cp > 1 || s.sequence_parallel) {
    out.cannot(
        "tensor, pipeline or context parallelism: the HF Trainer "
        "runs data parallel (FSDP or DeepSpeed ZeRO)");
  }
  if (s.checkpointing != Checkpointing::none &&
      s.checkpointing != Checkpointing::full) {
    out.cannot(
        fmt::format("{} checkpointing: gradient_checkpointing wraps "
                    "every decoder layer (modeling_utils.py)",
                    checkpointing_name(s.checkpointing)));
  }
  if (s.activation_offload && !trl) {
    out.cannot(
        "activation offload: TrainingArguments has none (TRL's "
        "SFTConfig.activation_offloading and torchtune's "
        "enable_activation_offloading have)");
  }
  if (s.optimizer_in_bwd) {
    out.cannot(
        "optimizer in backward: the HF Trainer steps after backward "
        "(torchtune's optimizer_in_bwd has it)");
  }
  if (s.float8) {
    out.cannot("float8 linears (torchtitan)");
  }
  if (s.loss != Loss::full && s.loss != Loss::chunked) {
    out.cannot(fmt::format("the {} loss", loss_name(s.loss)));
  }
  if (s.precision == Precision::amp) {
    out.cannot(
        "amp precision (fp32 parameters under autocast): the "
        "file's bf16/fp16 flags read back as mixed precision");
  }
  if (s.precision == Precision::pure && s.mode != Mode::full) {
    out.cannot("pure 16-bit adapters: PEFT keeps trainable weights in fp32");
  }
}

// TRL's preference configs, spelled so the TRL reader names the trainer:
// DPOConfig by precompute_ref_log_probs (a key only DPOConfig and KTOConfig
// have), KTOConfig and CPOConfig (SimPO) by their loss_type. ORPOConfig has
// no key of its own: the trainer is the `trl orpo` command.
void trl_preference_keys(const Resolved& s, Json& doc, Out& out) {
  switch (s.objective) {
    case TrainObjective::sft:
      return;
    case TrainObjective::dpo:
      doc["loss_type"] = "sigmoid";
      doc["precompute_ref_log_probs"] = s.precompute_ref;
      break;
    case TrainObjective::kto:
      doc["loss_type"] = "kto";
      doc["precompute_ref_log_probs"] = s.precompute_ref;
      break;
    case TrainObjective::simpo:
      doc["loss_type"] = "simpo";
      break;
    case TrainObjective::orpo:
      // ORPOConfig.beta (default 0.1) in a file whose name names the
      // trainer (args_file): the TRL reader reads it back as ORPO.
      doc.erase("loss_type");
      doc["beta"] = 0.1;
      break;
  }
  if (s.loss == Loss::chunked) {
    out.cannot(
        "a chunked loss: TRL's preference trainers take log-probs "
        "from the full logits");
  }
}

std::string_view hf_attn(Attn a) {
  return a == Attn::flash  ? "flash_attention_2"
         : a == Attn::sdpa ? "sdpa"
                           : "eager";
}

// The training arguments; `sharding`: write the FSDP / DeepSpeed keys (not
// when an accelerate config carries them).
// The Trainer runs every micro-batch but the last under no_sync; a plan
// that reduce-scatters each one says so through accelerator_config
// (accelerate GradientAccumulationPlugin.sync_each_batch; transformers
// honours it in its own loop since #43919).
void sync_each_batch_key(const Resolved& s, Json& doc) {
  if (s.fsdp && s.grad_accum > 1 && !s.fsdp_no_sync) {
    doc["accelerator_config"] = {
        {"gradient_accumulation_kwargs", {{"sync_each_batch", true}}}};
  }
}

Json hf_args(const Resolved& s, const Model& model, bool trl, bool sharding,
             Out& out) {
  // Adapters are TRL ModelConfig keys (use_peft, load_in_4bit):
  // TrainingArguments has none, so an adapter job's file is spelled as
  // TRL's (and read with TRL's defaults); what it may use is still `trl`'s.
  const bool trl_file =
      trl || s.mode != Mode::full || s.objective != TrainObjective::sft;
  Json doc = Json::object();
  hf_model_keys(s, model, doc, out);
  hf_limits(s, trl, out);
  doc["per_device_train_batch_size"] = s.batch;
  doc["gradient_accumulation_steps"] = s.grad_accum;
  // TRL SFTConfig.max_length; run_clm.py's block_size for the HF Trainer.
  doc[trl_file ? "max_length" : "block_size"] = s.seq;
  doc["bf16"] = s.dtype == Dtype::bf16;
  doc["fp16"] = s.dtype == Dtype::fp16;
  if (s.precision == Precision::pure && s.mode == Mode::full) {
    // The model loaded in 16 bits trains as loaded: no fp32 master copy.
    doc[trl_file ? "model_init_kwargs" : "torch_dtype"] =
        trl_file ? Json{{"torch_dtype",
                         s.dtype == Dtype::fp16 ? "float16" : "bfloat16"}}
                 : Json(s.dtype == Dtype::fp16 ? "float16" : "bfloat16");
  }
  doc["gradient_checkpointing"] = s.checkpointing != Checkpointing::none;
  if (trl_file) {
    doc["activation_offloading"] = trl && s.activation_offload;
  }
  if (s.loss == Loss::chunked && !trl) {
    // Liger's fused linear cross-entropy never materialises the logits.
    doc["use_liger_kernel"] = true;
  } else if (trl_file) {
    // SFTConfig.loss_type (TRL's default is chunked_nll).
    doc["loss_type"] = s.loss == Loss::chunked ? "chunked_nll" : "nll";
  }
  trl_preference_keys(s, doc, out);
  doc["optim"] = hf_optim(s.optimizer);
  doc["attn_implementation"] = hf_attn(s.attn);
  doc["torch_compile"] = s.compile;
  sync_each_batch_key(s, doc);
  if (!sharding) {
    return doc;
  }
  if (s.fsdp) {
    // transformers FSDPOption words; CPUOffload(offload_params=True) moves
    // parameters, gradients and optimizer states together.
    doc["fsdp"] = s.offload == Offload::all ? "full_shard offload auto_wrap"
                                            : "full_shard auto_wrap";
    doc["fsdp_config"] = {{"version", s.fsdp_version}};
    if (s.offload == Offload::optimizer || s.offload == Offload::params) {
      out.cannot(
          "optimizer-only or parameter-only offload under FSDP: "
          "CPUOffload offloads parameters, gradients and optimizer "
          "together (torch/distributed/fsdp/api.py)");
    }
  }
  return doc;
}

void push_ds(const Resolved& s, Out& out) {
  deepspeed_limits(s, out);
  out.w.blocks.push_back(
      {"DeepSpeed", json_text(deepspeed_doc(s)), std::string(k_ds_file)});
}

void torchrun_block(const Resolved& s, Out& out) {
  if (s.total_gpus() > 1) {
    out.w.blocks.push_back(
        {"torchrun",
         s.nodes > 1
             ? fmt::format("--nnodes {} --nproc_per_node {}", s.nodes, s.gpus)
             : fmt::format("--nproc_per_node {}", s.gpus),
         ""});
  }
}

void write_hf(const Resolved& s, const Model& model, bool trl,
              bool force_deepspeed, Out& out) {
  if (!s.training()) {
    out.cannot("inference: the Trainer trains");
    return;
  }
  const bool ds =
      !s.fsdp && (s.zero > 0 || s.offload != Offload::none || force_deepspeed);
  // The HF Trainer has no preference loss: TRL's trainers add it.
  const bool trl_args = trl || s.objective != TrainObjective::sft;
  Json doc = hf_args(s, model, trl_args, true, out);
  if (ds) {
    doc["deepspeed"] = k_ds_file;
    push_ds(s, out);
  }
  out.w.blocks.push_back(
      {trl_args ? "TRL" : "HF Trainer", json_text(doc), args_file(s)});
  torchrun_block(s, out);
}

// ---- accelerate config (accelerate commands/config/config_args.py,
// utils/dataclasses.py FullyShardedDataParallelPlugin, DeepSpeedPlugin)
// beside the training arguments it launches.

void write_accelerate(const Resolved& s, const Model& model, Out& out) {
  if (!s.training()) {
    out.cannot("inference: the accelerate launcher writer plans training");
    return;
  }
  Json cfg = {{"compute_environment", "LOCAL_MACHINE"}};
  cfg["num_machines"] = s.nodes;
  cfg["num_processes"] = s.total_gpus();
  cfg["mixed_precision"] = s.dtype == Dtype::bf16   ? "bf16"
                           : s.dtype == Dtype::fp16 ? "fp16"
                                                    : "no";
  if (s.fsdp) {
    cfg["distributed_type"] = "FSDP";
    Json f = {{"fsdp_version", s.fsdp_version}};
    if (s.fsdp_version == 2) {
      f["fsdp_reshard_after_forward"] = true;
    } else {
      f["fsdp_sharding_strategy"] = "FULL_SHARD";
    }
    f["fsdp_offload_params"] = s.offload == Offload::all;
    f["fsdp_activation_checkpointing"] = false;
    cfg["fsdp_config"] = f;
    if (s.offload == Offload::optimizer || s.offload == Offload::params) {
      out.cannot(
          "optimizer-only or parameter-only offload under FSDP: "
          "fsdp_offload_params moves parameters, gradients and "
          "optimizer states together");
    }
  } else if (s.zero > 0 || s.offload != Offload::none) {
    cfg["distributed_type"] = "DEEPSPEED";
    Json d = {{"zero_stage", s.zero},
              {"gradient_accumulation_steps", s.grad_accum}};
    const bool opt =
        s.offload == Offload::optimizer || s.offload == Offload::all;
    const bool par = s.offload == Offload::params || s.offload == Offload::all;
    d["offload_optimizer_device"] = opt ? "cpu" : "none";
    d["offload_param_device"] = par ? "cpu" : "none";
    cfg["deepspeed_config"] = d;
    deepspeed_limits(s, out);
  } else {
    cfg["distributed_type"] = s.total_gpus() > 1 ? "MULTI_GPU" : "NO";
  }
  // The training file first: a launcher config joins the training file
  // before it (launch.hpp read_launch_files), as `accelerate launch
  // --config_file accelerate_config.yaml train.py train_args.json` runs it.
  const Json args = hf_args(s, model, false, false, out);
  out.w.blocks.push_back({"HF Trainer", json_text(args), args_file(s)});
  out.w.blocks.push_back(
      {"accelerate", json_text(cfg), std::string(k_accelerate_file)});
}

// ---- torchtune recipe config (recipes/*_finetune_*.py, the model builders
// torchtune/models/<family>/_model_builders.py), read as torchtune.cpp reads
// it: a YAML config (here in JSON, which YAML reads).

}  // namespace

bool torchtune_has_builder(std::string_view model_type) {
  static constexpr std::array<std::string_view, 7> k_types = {
      "llama", "mistral", "gemma", "gemma2", "qwen2", "qwen3", "phi3"};
  return std::find(k_types.begin(), k_types.end(), model_type) != k_types.end();
}

namespace {

std::string torchtune_builder(const Resolved& s, const Model& model) {
  std::string name = model.aliases.empty() ? model.name : model.aliases.front();
  name = name.substr(name.rfind('/') + 1);  // no org: builders are lower case
  std::transform(name.begin(), name.end(), name.begin(), [](char c) {
    return c == '-' || c == '.'
               ? '_'
               : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  const std::string_view prefix = s.mode == Mode::qlora  ? "qlora_"
                                  : s.mode == Mode::lora ? "lora_"
                                                         : "";
  // The module is the builder's name less its size ("llama3_1_8b" is in
  // torchtune.models.llama3_1).
  const auto size = name.rfind('_');
  const std::string module =
      size == std::string::npos ? model.model_type : name.substr(0, size);
  return fmt::format("torchtune.models.{}.{}{}", module, prefix, name);
}

std::string_view torchtune_optim(Optimizer o) {
  switch (o) {
    case Optimizer::adamw:
      return "torch.optim.AdamW";
    case Optimizer::adamw_8bit:
      return "bitsandbytes.optim.AdamW8bit";
    case Optimizer::paged_adamw:
      return "bitsandbytes.optim.PagedAdamW";
    case Optimizer::paged_adamw_8bit:
      return "bitsandbytes.optim.PagedAdamW8bit";
    case Optimizer::sgd:
      return "torch.optim.SGD";
    case Optimizer::adafactor:
      return "torch.optim.Adafactor";
  }
  return "torch.optim.AdamW";
}

void torchtune_limits(const Resolved& s, const Model& model, Out& out) {
  if (s.pp > 1 || s.cp > 1 || s.sequence_parallel || s.float8) {
    out.cannot(
        "pipeline or context parallelism, sequence parallelism or "
        "float8 in a torchtune recipe");
  }
  if (s.checkpointing != Checkpointing::none &&
      s.checkpointing != Checkpointing::full) {
    out.cannot("checkpointing other than full (ac_mode full)");
  }
  if (s.precision != Precision::pure && s.dtype != Dtype::fp32) {
    out.cannot(
        "fp32 master weights: torchtune recipes train in `dtype` "
        "with no fp32 copy (training/precision.py)");
  }
  if (s.attn != Attn::sdpa) {
    out.cannot(
        "attention other than sdpa: torchtune calls "
        "F.scaled_dot_product_attention");
  }
  if (s.loss != Loss::full && s.loss != Loss::chunked) {
    out.cannot(fmt::format("the {} loss", loss_name(s.loss)));
  }
  if (s.offload == Offload::optimizer || s.offload == Offload::params) {
    out.cannot(
        "optimizer-only or parameter-only offload: fsdp_cpu_offload "
        "is CPUOffloadPolicy (parameters, gradients and step)");
  }
  if (!s.fsdp && s.zero != 2 && s.total_gpus() > 1) {
    out.cannot(
        "data parallelism without sharding: the distributed recipes "
        "shard with FSDP2 (training.shard_model)");
  }
  const bool mlp = (s.lora_targets & (k_lora_gate | k_lora_up | k_lora_down));
  const bool all_mlp =
      (s.lora_targets & (k_lora_gate | k_lora_up | k_lora_down)) ==
      (k_lora_gate | k_lora_up | k_lora_down);
  if (s.mode != Mode::full && mlp && !all_mlp) {
    out.cannot("LoRA on part of the MLP: apply_lora_to_mlp takes all three");
  }
  if (s.mode == Mode::qlora ? s.quant != Quant::nf4 : !own_quant(s, model)) {
    out.cannot(
        fmt::format("{} weights: QLoRA builders quantize with "
                    "torchao NF4, other builders load the checkpoint",
                    quant_name(s.quant)));
  }
}

// The DPO recipes' losses (torchtune/rlhf/loss): DPOLoss with a reference
// (full_dpo_distributed, lora_dpo_*), SimPOLoss without (torchtune 0.3-0.4).
void torchtune_preference(const Resolved& s, Json& doc, Out& out) {
  if (s.objective == TrainObjective::sft) {
    return;
  }
  if (s.objective == TrainObjective::dpo ||
      s.objective == TrainObjective::simpo) {
    doc["loss"] = {{"_component_", s.objective == TrainObjective::dpo
                                       ? "torchtune.rlhf.loss.DPOLoss"
                                       : "torchtune.rlhf.loss.SimPOLoss"}};
  } else {
    out.cannot(fmt::format("{}: torchtune ships DPO recipes only",
                           objective_name(s.objective)));
  }
  if (s.precompute_ref) {
    out.cannot(
        "precomputed reference log-probs: torchtune's DPO recipes "
        "run the reference every step");
  }
}

void write_torchtune(const Resolved& s, const Model& model, Out& out) {
  if (!s.training()) {
    out.cannot("inference: torchtune recipes train");
    return;
  }
  if (!torchtune_has_builder(model.model_type)) {
    out.cannot(
        fmt::format("model_type {}: torchtune ships no model builder "
                    "for it (torchtune/models)",
                    model.model_type));
    return;
  }
  torchtune_limits(s, model, out);
  Json m = {{"_component_", torchtune_builder(s, model)}};
  if (s.mode != Mode::full) {
    Json attn = Json::array();
    for (const auto& [bit, name] :
         std::array<std::pair<unsigned, const char*>, 4>{
             {{k_lora_q, "q_proj"},
              {k_lora_k, "k_proj"},
              {k_lora_v, "v_proj"},
              {k_lora_o, "output_proj"}}}) {
      if ((s.lora_targets & bit) != 0) {
        attn.push_back(name);
      }
    }
    m["lora_attn_modules"] = attn;
    m["apply_lora_to_mlp"] = (s.lora_targets & k_lora_gate) != 0;
    m["lora_rank"] = s.lora_rank;
    m["lora_dropout"] = s.lora_dropout;
  }
  Json doc = {{"model", m}};
  doc["checkpointer"] = {{"checkpoint_dir", "/tmp/" + model_id(model)}};
  doc["tokenizer"] = {{"max_seq_len", s.seq}};
  doc["batch_size"] = s.batch;
  doc["gradient_accumulation_steps"] = s.grad_accum;
  doc["optimizer"] = {{"_component_", torchtune_optim(s.optimizer)}};
  doc["optimizer_in_bwd"] = s.optimizer_in_bwd;
  doc["loss"] = {
      {"_component_", s.loss == Loss::chunked
                          ? "torchtune.modules.loss.CEWithChunkedOutputLoss"
                          : "torch.nn.CrossEntropyLoss"}};
  torchtune_preference(s, doc, out);
  doc["compile"] = s.compile;
  doc["enable_activation_checkpointing"] =
      s.checkpointing != Checkpointing::none;
  doc["enable_activation_offloading"] = s.activation_offload;
  doc["dtype"] = dtype_name(s.dtype);
  doc["fsdp_cpu_offload"] = s.offload == Offload::all;
  doc["fsdp_reshard_after_forward"] = !(s.zero == 2 && !s.fsdp);
  if (s.tp > 1) {
    doc["tensor_parallel_dim"] = s.tp;
  }
  out.w.blocks.push_back(
      {"torchtune", json_text(doc), "torchtune_config.yaml"});
  torchrun_block(s, out);
}

// ---- axolotl config (axolotl utils/schemas/config.py, training.py,
// peft.py), read as axolotl.cpp reads it (JSON, which YAML reads).

void axolotl_limits(const Resolved& s, bool ds, Out& out) {
  if (s.pp > 1 || s.cp > 1 || s.sequence_parallel || s.float8 ||
      s.optimizer_in_bwd) {
    out.cannot(
        "pipeline, context or sequence parallelism, float8 or the "
        "optimizer in backward in axolotl");
  }
  if (s.checkpointing != Checkpointing::none &&
      s.checkpointing != Checkpointing::full) {
    out.cannot("checkpointing other than gradient_checkpointing (every layer)");
  }
  if (s.loss != Loss::full && s.loss != Loss::chunked) {
    out.cannot(fmt::format("the {} loss", loss_name(s.loss)));
  }
  // resolve_dtype loads the model in bf16/fp16 and the HF Trainer trains it
  // as loaded, with PEFT's LoRA adapters in fp32 over it (mixed:
  // autocast_adapter_dtype=True); DeepSpeed adds fp32 master weights.
  const bool adapters = s.mode != Mode::full;
  if (ds && s.precision == Precision::pure) {
    out.cannot("pure 16-bit training under DeepSpeed (fp32 master weights)");
  } else if (!ds && s.dtype != Dtype::fp32 && adapters &&
             s.precision != Precision::mixed) {
    out.cannot(
        "16-bit LoRA adapters: PEFT keeps them in fp32 over the 16-bit base");
  } else if (!ds && s.dtype != Dtype::fp32 && !adapters &&
             s.precision != Precision::pure) {
    out.cannot(
        "fp32 master weights: axolotl trains the weights as loaded in 16 "
        "bits");
  }
  if (s.fsdp &&
      (s.offload == Offload::optimizer || s.offload == Offload::params)) {
    out.cannot("optimizer-only or parameter-only offload under FSDP");
  }
}

void write_axolotl(const Resolved& s, const Model& model, Out& out) {
  if (!s.training()) {
    out.cannot("inference: axolotl trains");
    return;
  }
  const bool ds = !s.fsdp && (s.zero > 0 || s.offload != Offload::none);
  axolotl_limits(s, ds, out);
  Json doc = {{"base_model", model_id(model)}};
  remote_code_key(model, doc);
  if (s.mode != Mode::full) {
    doc["adapter"] = s.mode == Mode::qlora ? "qlora" : "lora";
    if (s.mode == Mode::qlora) {
      doc["load_in_4bit"] = true;
      doc["bnb_config_kwargs"] = {
          {"bnb_4bit_use_double_quant", s.quant == Quant::nf4}};
    } else if (s.quant == Quant::int8) {
      doc["load_in_8bit"] = true;
    } else if (!own_quant(s, model)) {
      out.cannot(fmt::format("LoRA over {} weights", quant_name(s.quant)));
    }
    doc["lora_r"] = s.lora_rank;
    doc["lora_dropout"] = s.lora_dropout;
    doc["lora_target_modules"] = lora_modules(s.lora_targets, model, out);
  } else if (!own_quant(s, model)) {
    out.cannot("quantized weights in a full fine-tune");
  }
  if (s.objective != TrainObjective::sft) {
    // rl (utils/schemas/enums.py RLType).
    doc["rl"] = objective_name(s.objective);
    doc["precompute_ref_log_probs"] = s.precompute_ref;
  }
  doc["sequence_len"] = s.seq;
  doc["micro_batch_size"] = s.batch;
  doc["gradient_accumulation_steps"] = s.grad_accum;
  doc["gradient_checkpointing"] = s.checkpointing != Checkpointing::none;
  doc["activation_offloading"] = s.activation_offload;
  doc["attn_implementation"] = hf_attn(s.attn);
  doc["chunked_cross_entropy"] = s.loss == Loss::chunked;
  doc["bf16"] = s.dtype == Dtype::bf16;
  doc["fp16"] = s.dtype == Dtype::fp16;
  doc["optimizer"] = hf_optim(s.optimizer);
  doc["torch_compile"] = s.compile;
  if (s.tp > 1) {
    doc["tensor_parallel_size"] = s.tp;
  }
  if (s.fsdp) {
    doc["fsdp"] = s.offload == Offload::all ? "full_shard offload auto_wrap"
                                            : "full_shard auto_wrap";
    doc["fsdp_version"] = s.fsdp_version;
    if (s.grad_accum > 1 && !s.fsdp_no_sync) {
      out.cannot(
          "a reduce-scatter after every micro-batch (axolotl's Trainer "
          "accumulates under no_sync)");
    }
  } else if (ds) {
    doc["deepspeed"] = k_ds_file;
    push_ds(s, out);
  }
  out.w.blocks.push_back({"axolotl", json_text(doc), "axolotl_config.yaml"});
}

// ---- LLaMA-Factory (hparams/model_args.py, finetuning_args.py,
// data_args.py, training_args.py), read as llama_factory.cpp reads it.

void llama_factory_limits(const Resolved& s, bool ds, Out& out) {
  if (s.tp > 1 || s.pp > 1 || s.cp > 1 || s.sequence_parallel || s.float8 ||
      s.optimizer_in_bwd) {
    out.cannot(
        "tensor, pipeline, context or sequence parallelism, float8 "
        "or the optimizer in backward in LLaMA-Factory");
  }
  if (s.checkpointing != Checkpointing::none &&
      s.checkpointing != Checkpointing::full) {
    out.cannot("checkpointing other than every layer");
  }
  if (s.activation_offload && s.checkpointing != Checkpointing::full) {
    out.cannot(
        "activation offload without checkpointing (use_unsloth_gc "
        "offloads the checkpointed inputs)");
  }
  if (s.loss != Loss::full && s.loss != Loss::chunked) {
    out.cannot(fmt::format("the {} loss", loss_name(s.loss)));
  }
  if (s.precision == Precision::pure && (ds || s.dtype != Dtype::bf16)) {
    out.cannot("pure 16-bit training other than pure_bf16 without DeepSpeed");
  }
  if (s.precision == Precision::amp) {
    out.cannot(
        "amp precision (fp32 parameters under autocast): the "
        "file's bf16/fp16 flags read back as mixed precision");
  }
  if (s.fsdp &&
      (s.offload == Offload::optimizer || s.offload == Offload::params)) {
    out.cannot("optimizer-only or parameter-only offload under FSDP");
  }
}

// stage dpo with pref_loss sigmoid / orpo / simpo, stage kto
// (hparams/finetuning_args.py).
void llama_factory_preference(const Resolved& s, Json& doc, Out& out) {
  if (s.objective == TrainObjective::kto) {
    doc["stage"] = "kto";
  } else if (s.objective != TrainObjective::sft) {
    doc["stage"] = "dpo";
    doc["pref_loss"] = s.objective == TrainObjective::dpo
                           ? std::string("sigmoid")
                           : std::string(objective_name(s.objective));
  }
  if (s.precompute_ref) {
    out.cannot(
        "precomputed reference log-probs: LLaMA-Factory runs the "
        "reference every step");
  }
}

void write_llama_factory(const Resolved& s, const Model& model, Out& out) {
  if (!s.training()) {
    out.cannot("inference: the LLaMA-Factory writer plans training");
    return;
  }
  const bool ds = !s.fsdp && (s.zero > 0 || s.offload != Offload::none);
  llama_factory_limits(s, ds, out);
  Json doc = {{"model_name_or_path", model_id(model)}, {"stage", "sft"}};
  remote_code_key(model, doc);
  llama_factory_preference(s, doc, out);
  doc["finetuning_type"] = s.mode == Mode::full ? "full" : "lora";
  if (s.mode == Mode::qlora) {
    doc["quantization_bit"] = 4;
    doc["double_quantization"] = s.quant == Quant::nf4;
  } else if (s.mode == Mode::lora && s.quant == Quant::int8) {
    doc["quantization_bit"] = 8;
  } else if (!own_quant(s, model)) {
    out.cannot(fmt::format("{} weights", quant_name(s.quant)));
  }
  if (s.mode != Mode::full) {
    doc["lora_rank"] = s.lora_rank;
    doc["lora_dropout"] = s.lora_dropout;
    std::string targets;
    for (const auto& name : lora_modules(s.lora_targets, model, out)) {
      if (!targets.empty()) {
        targets.push_back(',');
      }
      targets.append(name.get<std::string>());
    }
    doc["lora_target"] = targets;
  }
  doc["cutoff_len"] = s.seq;
  doc["flash_attn"] = s.attn == Attn::flash  ? "fa2"
                      : s.attn == Attn::sdpa ? "sdpa"
                                             : "disabled";
  doc["disable_gradient_checkpointing"] =
      s.checkpointing == Checkpointing::none;
  doc["use_unsloth_gc"] = s.activation_offload;
  doc["enable_liger_kernel"] = s.loss == Loss::chunked;
  doc["per_device_train_batch_size"] = s.batch;
  doc["gradient_accumulation_steps"] = s.grad_accum;
  const bool pure = s.precision == Precision::pure && !ds;
  doc["bf16"] = s.dtype == Dtype::bf16 && !pure;
  doc["fp16"] = s.dtype == Dtype::fp16;
  doc["pure_bf16"] = pure;
  doc["optim"] = hf_optim(s.optimizer);
  doc["torch_compile"] = s.compile;
  if (s.fsdp) {
    doc["fsdp"] = s.offload == Offload::all ? "full_shard offload auto_wrap"
                                            : "full_shard auto_wrap";
    doc["fsdp_config"] = {{"version", s.fsdp_version}};
    sync_each_batch_key(s, doc);
  } else if (ds) {
    doc["deepspeed"] = k_ds_file;
    push_ds(s, out);
  }
  out.w.blocks.push_back(
      {"LLaMA-Factory", json_text(doc), "llama_factory_config.yaml"});
  torchrun_block(s, out);
}

// ---- Megatron-LM (megatron/training/arguments.py); no reader.

void write_megatron(const Resolved& s, Out& out) {
  if (!s.training()) {
    out.cannot("inference: Megatron-LM trains");
    return;
  }
  std::string a = fmt::format(
      "--tensor-model-parallel-size {} --pipeline-model-parallel-size {} "
      "--micro-batch-size {} --global-batch-size {} --seq-length {}",
      s.tp, s.pp, s.batch, s.batch * s.grad_accum * s.dp(), s.seq);
  if (s.sequence_parallel) {
    a += " --sequence-parallel";
  }
  if (s.checkpointing == Checkpointing::selective) {
    a += " --recompute-granularity selective";
  } else if (s.checkpointing == Checkpointing::full) {
    a += " --recompute-granularity full --recompute-method uniform";
  }
  a += s.dtype == Dtype::bf16   ? " --bf16"
       : s.dtype == Dtype::fp16 ? " --fp16"
                                : "";
  if (s.zero > 0) {
    a += " --use-distributed-optimizer";
  }
  if (s.objective != TrainObjective::sft) {
    out.cannot(
        fmt::format("{}: Megatron-LM's pretrain script trains one "
                    "sequence per example",
                    objective_name(s.objective)));
  }
  if (s.mode != Mode::full) {
    out.cannot("LoRA/QLoRA: Megatron-LM trains every weight (NeMo adds PEFT)");
  }
  if (s.optimizer != Optimizer::adamw && s.optimizer != Optimizer::sgd) {
    out.cannot(
        "bitsandbytes or paged optimizers: Megatron uses its own "
        "distributed Adam");
  }
  if (s.offload != Offload::none || s.activation_offload ||
      s.optimizer_in_bwd) {
    out.cannot("CPU offload or optimizer in backward");
  }
  out.w.blocks.push_back({"Megatron", a, ""});
  torchrun_block(s, out);
}

// LitGPT's command line (litgpt/__main__.py finetune_lora / finetune_full,
// jsonargparse flags, 0.4 and later): the layouts its scripts fix are
// written by the device count (resolve_litgpt); what they cannot run is
// refused.
std::string litgpt_precision(const Resolved& s, Out& out) {
  const std::string_view bits = s.dtype == Dtype::fp16 ? "16" : "bf16";
  if (s.dtype == Dtype::fp32) {
    return "32-true";
  }
  if (s.precision == Precision::mixed) {
    out.cannot(
        "fp32 master weights over 16-bit weights: LitGPT trains bf16-true "
        "or bf16-mixed (autocast over fp32 weights)");
  }
  return fmt::format("{}-{}", bits,
                     s.precision == Precision::amp ? "mixed" : "true");
}

std::string litgpt_optimizer(const Resolved& s, Out& out) {
  if (s.mode == Mode::qlora) {
    if (s.optimizer != Optimizer::paged_adamw) {
      out.cannot(
          "an optimizer other than bnb PagedAdamW under --quantize "
          "(instantiate_bnb_optimizer)");
    }
    return {};
  }
  switch (s.optimizer) {
    case Optimizer::adamw:
      return {};
    case Optimizer::sgd:
      return " --optimizer SGD";
    case Optimizer::adamw_8bit:
      return " --optimizer.class_path bitsandbytes.optim.AdamW8bit";
    case Optimizer::paged_adamw:
      return " --optimizer.class_path bitsandbytes.optim.PagedAdamW";
    case Optimizer::paged_adamw_8bit:
      return " --optimizer.class_path bitsandbytes.optim.PagedAdamW8bit";
    case Optimizer::adafactor:
      break;
  }
  out.cannot("Adafactor: LitGPT instantiates torch or bitsandbytes optimizers");
  return {};
}

std::string litgpt_lora(const Resolved& s, Out& out) {
  const unsigned t = s.lora_targets;
  const unsigned mlp = k_lora_gate | k_lora_up | k_lora_down;
  if ((t & mlp) != 0 && (t & mlp) != mlp) {
    out.cannot("LoRA on part of the MLP: lora_mlp adapts all its linears");
  }
  const auto on = [&](unsigned bits) {
    return (t & bits) != 0 ? "true" : "false";
  };
  return fmt::format(
      " --lora_r {} --lora_dropout {} --lora_query {} --lora_key {} "
      "--lora_value {} --lora_projection {} --lora_mlp {} --lora_head false",
      s.lora_rank, s.lora_dropout, on(k_lora_q), on(k_lora_k), on(k_lora_v),
      on(k_lora_o), on(mlp));
}

void litgpt_refusals(const Resolved& s, Out& out) {
  if (s.objective != TrainObjective::sft) {
    out.cannot(fmt::format("{}: LitGPT fine-tunes one sequence per example",
                           objective_name(s.objective)));
  }
  if (s.tp > 1 || s.pp > 1 || s.cp > 1 || (s.zero > 0 && !s.fsdp) ||
      s.offload != Offload::none) {
    out.cannot(
        "tensor, pipeline or context parallelism, ZeRO or CPU offload: "
        "LitGPT fine-tunes data parallel under FSDP without offload");
  }
  if (s.activation_offload || s.optimizer_in_bwd || s.compile || s.float8) {
    out.cannot(
        "activation offload, optimizer in backward, torch.compile or float8: "
        "finetune_lora and finetune_full have no setting for them");
  }
  if (s.fsdp && s.total_gpus() == 1) {
    out.cannot(
        "FSDP on one device: LitGPT's scripts run one device without "
        "a strategy");
  }
  const Checkpointing scripted =
      s.total_gpus() > 1 ? Checkpointing::full : Checkpointing::none;
  if (s.checkpointing != scripted) {
    out.cannot(
        "activation checkpointing other than LitGPT's (none on one device, "
        "every Block on several)");
  }
  const std::int64_t chunk = s.mode == Mode::full ? 0 : k_litgpt_lm_head_chunk;
  if (s.loss != Loss::chunked || s.lm_head_chunk != chunk ||
      s.attn != Attn::sdpa) {
    out.cannot(
        "a loss, lm_head split or attention other than LitGPT's "
        "(chunked_cross_entropy, SDPA)");
  }
  if (s.fsdp && s.grad_accum > 1 && !s.fsdp_no_sync) {
    out.cannot(
        "a reduce-scatter every micro-batch: LitGPT accumulates under "
        "no_backward_sync");
  }
  if (s.mode == Mode::qlora &&
      (s.nf4_backend != Nf4Backend::bnb || s.precision != Precision::pure)) {
    out.cannot("QLoRA other than bitsandbytes NF4 under bf16-true");
  }
  if (s.litgpt_release < Release{0, 4, 0}) {
    out.cannot(
        "LitGPT before 0.4: its finetune scripts took other flags (the "
        "block is written for the `litgpt` command)");
  }
}

void write_litgpt(const Resolved& s, const Model& model, Out& out) {
  if (!s.training()) {
    out.cannot("inference: litgpt generate and serve are not written");
    return;
  }
  litgpt_refusals(s, out);
  std::string a =
      fmt::format("litgpt {} {} --devices {}",
                  s.mode == Mode::full ? "finetune_full" : "finetune_lora",
                  model_id(model), s.gpus);
  if (s.nodes > 1) {
    a += fmt::format(" --num_nodes {}", s.nodes);
  }
  a += " --precision " + litgpt_precision(s, out);
  if (s.mode == Mode::qlora) {
    if (s.quant == Quant::nf4) {
      a += " --quantize bnb.nf4-dq";
    } else if (s.quant == Quant::nf4_nodq) {
      a += " --quantize bnb.nf4";
    } else {
      out.cannot(fmt::format("{} weights: LitGPT quantizes with bnb.nf4",
                             quant_name(s.quant)));
    }
  }
  a += fmt::format(
      " --train.micro_batch_size {} --train.global_batch_size {} "
      "--train.max_seq_length {}",
      s.batch, s.batch * s.grad_accum * s.dp(), s.seq);
  if (s.mode != Mode::full) {
    a += litgpt_lora(s, out);
  }
  a += litgpt_optimizer(s, out);
  out.w.blocks.push_back({"LitGPT", a, ""});
}

}  // namespace

LaunchWriting write_launch(Framework framework, const Resolved& setup,
                           const Model& model) {
  Out out;
  const bool litgpt = framework == Framework::litgpt;
  if (setup.untied_head && model.tie_word_embeddings && !litgpt) {
    // Every other framework written here loads transformers' tied head.
    out.cannot("a second copy of the tied output head (LitGPT's GPT)");
  }
  if (setup.fsdp_frozen_grads && !litgpt) {
    // PEFT's fsdp_auto_wrap_policy (the HF Trainer's) and torchtune's FSDP2
    // wrap the adapters apart from the frozen weights.
    out.cannot(
        "adapters flattened into their frozen layer's FSDP1 unit "
        "(LitGPT <= 0.5.7)");
  }
  switch (framework) {
    case Framework::vllm:
      write_vllm(setup, model, out);
      break;
    case Framework::generate:
      write_generate(setup, model, out);
      break;
    case Framework::deepspeed:
      write_hf(setup, model, false, true, out);
      break;
    case Framework::hf_trainer:
      write_hf(setup, model, false, false, out);
      break;
    case Framework::trl:
      write_hf(setup, model, true, false, out);
      break;
    case Framework::accelerate:
      write_accelerate(setup, model, out);
      break;
    case Framework::megatron:
      write_megatron(setup, out);
      break;
    case Framework::torchtune:
      write_torchtune(setup, model, out);
      break;
    case Framework::axolotl:
      write_axolotl(setup, model, out);
      break;
    case Framework::llama_factory:
      write_llama_factory(setup, model, out);
      break;
    case Framework::litgpt:
      write_litgpt(setup, model, out);
      break;
    case Framework::torchtitan:
      out.cannot(fmt::format("{} launch files: no writer yet",
                             framework_name(framework)));
      break;
  }
  return std::move(out.w);
}

}  // namespace oomplan
