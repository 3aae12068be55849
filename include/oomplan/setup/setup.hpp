#pragma once

// The settings of one plan: Setup as the user asked for it, Resolved with
// every default filled in, and the names of their enumerations.

#include "oomplan/model/dtype.hpp"
#include "oomplan/setup/vllm_engine.hpp"
#include "oomplan/util/units.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

enum class Mode { infer, full, lora, qlora };
enum class Engine { hf, vllm };
// The stack that runs the job: what a fix may change and how its launch lines
// are written (advice/capability.hpp has one row per framework). The first
// eight are the --framework names and the launch readers of `check`;
// megatron and torchtitan are stacks a fix may switch to; generate is
// transformers' model.generate; litgpt is a --framework name without a
// reader.
enum class Framework {
  vllm,
  deepspeed,
  hf_trainer,
  trl,
  accelerate,
  axolotl,
  torchtune,
  llama_factory,
  megatron,
  torchtitan,
  generate,
  litgpt
};
enum class Offload { none, optimizer, params, all };
// Activation checkpointing policies, ordered by what they keep (most first):
// none; selective (Megatron: attention core recomputed); every (every-N:
// every Nth layer fully checkpointed, the others keep all); op (torchtitan
// per-op selective AC); full (every decoder layer keeps only its input:
// HF gradient_checkpointing, torchtune, torchtitan full, Megatron uniform);
// ds_partition / ds_cpu (DeepSpeed checkpointing with partition_activations
// over the tensor-parallel ranks / cpu_checkpointing to host RAM).
enum class Checkpointing {
  none,
  selective,
  every,  // every-N: torchtitan/torchtune layer SAC, every Nth layer full
  op,
  full,
  ds_partition,
  ds_cpu
};
enum class Attn { eager, sdpa, flash };
// Training precision: mixed (16-bit weights + fp32 master and states:
// DeepSpeed, Megatron), pure (everything in --dtype: torchtune), amp (fp32
// parameters under torch.autocast: HF Trainer bf16/fp16 on an fp32 model,
// FSDP MixedPrecision over fp32 parameters).
enum class Precision { mixed, pure, amp };
enum class Optimizer {
  adamw,
  adamw_8bit,
  paged_adamw,
  paged_adamw_8bit,
  sgd,
  adafactor
};
// Cross-entropy as the training loop computes it (bytes per logit differ):
// full (the model returns fp32 logits the loop keeps through backward),
// chunked (torchtune CEWithChunkedOutputLoss), upcast (the loss upcasts a
// 16-bit copy, the output is freed before backward: torchtitan, transformers
// >= 4.49), upcast_shift (plus an fp32 shifted copy: transformers 4.46-4.48),
// fp32_shift (the model upcasts, the loss shifts a copy: transformers <= 4.45).
enum class Loss { full, chunked, upcast, upcast_shift, fp32_shift };

// The training objective (--objective). sft: one sequence per example. The
// preference objectives score a chosen and a rejected completion per
// example: dpo (TRL DPOTrainer, also IPO and the other DPO loss_types) holds
// a frozen reference model besides the policy unless the policy is a PEFT
// model or the reference log-probs are precomputed; orpo (ORPOTrainer) and
// simpo (CPOTrainer loss_type "simpo") are reference-free; kto
// (KTOTrainer) scores one completion per example against a reference model.
enum class TrainObjective { sft, dpo, orpo, kto, simpo };

// LoRA target projections, as a bit set.
enum LoraTarget : unsigned {
  k_lora_q = 1U << 0,
  k_lora_k = 1U << 1,
  k_lora_v = 1U << 2,
  k_lora_o = 1U << 3,
  k_lora_gate = 1U << 4,
  k_lora_up = 1U << 5,
  k_lora_down = 1U << 6,
  k_lora_attn = k_lora_q | k_lora_k | k_lora_v | k_lora_o,
  k_lora_all = k_lora_attn | k_lora_gate | k_lora_up | k_lora_down,
};

// vLLM behaviour eras (DESIGN §2 --vllm-version).
enum class VllmEra {
  v0,  // <= 0.6: V0 engine, profile includes non-torch differently, no chunked
       // prefill < 32k
  v1_early,  // 0.7 - 0.10
  current,   // >= 0.11
};

// --fsdp-version's default: 2, PyTorch's fully_shard, which torchtune (since
// its PRs #1287 and #1517, Aug-Sep 2024) and torchtitan run and what --fsdp
// has always planned. The HF Trainer and accelerate run FSDP1 unless their
// config says fsdp_version: 2; their launch readers give --fsdp-version 1.
inline constexpr int k_default_fsdp_version = 2;

// QLoRA's NF4 matmul over the frozen base: bitsandbytes' MatMul4Bit (PEFT,
// LitGPT, axolotl, LLaMA-Factory), which saves its input for backward, or
// torchao's linear_nf4 (torchtune), which saves only the NF4 weight.
enum class Nf4Backend { bnb, torchao };

// The kernel that runs GPTQ weights under transformers (engine hf
// inference): AutoGPTQ's exllama (v1) and exllamav2, and GPTQModel's marlin,
// cuda-old (AutoGPTQ's fallback), torch and triton. `none` when the plan has
// no GPTQ weights on engine hf.
enum class GptqKernel {
  none,
  exllama,
  exllamav2,
  marlin,
  cuda_old,
  torch,
  triton
};
// transformers 4.49 (#35012, with optimum 1.24) loads GPTQ checkpoints with
// GPTQModel when it is installed, and v5 (#41567) only with it; before, with
// AutoGPTQ through optimum.
inline constexpr Release k_transformers_gptqmodel{4, 49, 0};
// transformers v5 (#41567) loads AWQ checkpoints with GPTQModel too; before,
// unfused AWQ layers are AutoAWQ's WQLinear_GEMM.
inline constexpr Release k_transformers_awq_gptqmodel{5, 0, 0};

// The transformers release planned without --transformers-version: the one
// tests/data/measured ran (5.17). Every release from 4.46 allocates the same
// in generate (memory/hf_activations.cpp).
inline constexpr Release k_transformers_default{5, 17, 0};
// generate's prefill computes the last position's logits only from 4.45
// (#31292, num_logits_to_keep); it carries one DynamicCache through decoding,
// instead of tuples rebuilt each step, from 4.42 (#30536).
inline constexpr Release k_transformers_last_logits{4, 45, 0};
inline constexpr Release k_transformers_one_cache{4, 42, 0};
// from_pretrained's tensor parallelism: tp_plan="auto" from 4.47 (#34184,
// native PyTorch TP); distributed_config=DistributedConfig(tp_size=N) from
// 5.11, after #45409 wired it into from_pretrained and #47352 removed the
// tp_plan kwarg (#48300 restored it, deprecated; 5.17's docs name only
// DistributedConfig).
inline constexpr Release k_transformers_tp_plan{4, 47, 0};
inline constexpr Release k_transformers_distributed_config{5, 11, 0};

// torchtitan by release (--torchtitan-version). Planned without the option:
// the latest release, 0.2.2 (2026-02-20; main behaves the same here).
inline constexpr Release k_torchtitan_default{0, 2, 2};
// torch.compile covers the loss from #1033 (2025-04-02, first released in
// 0.1.0: components/loss.py build_cross_entropy_loss); before, only each
// TransformerBlock is compiled (parallelize_llama.py apply_compile) and the
// loss runs eager.
inline constexpr Release k_torchtitan_compiled_loss{0, 1, 0};

// LitGPT by release (--litgpt-version). Planned without the option: the
// latest release, 0.5.13 (26857050, 2026-06-29). From 0.5.0 (#1770,
// ae798aba) finetune_lora swaps in bitsandbytes' StableEmbedding after the
// optimizer is built when it quantizes; from 0.5.8 (#1538, 281510ab) its
// FSDP1 wraps each nn.Linear instead of each Block; from 0.5.11 (#2086,
// 5ac69b06) it shards LoRA with FSDP2 fully_shard.
inline constexpr Release k_litgpt_default{0, 5, 13};
inline constexpr Release k_litgpt_stable_embedding{0, 5, 0};
inline constexpr Release k_litgpt_linear_wrap{0, 5, 8};
inline constexpr Release k_litgpt_fsdp2_lora{0, 5, 11};
// LitGPT's finetune_lora calls lm_head on 128-token slices of the sequence
// (litgpt/finetune/lora.py fit: model(input_ids, lm_head_chunk_size=128)).
inline constexpr std::int64_t k_litgpt_lm_head_chunk = 128;

// The default --min-headroom margin, as a share of the card: a plan that fits
// with less free gets the low-headroom warning, and a fix must keep at least
// this much. The caching allocator's fragmentation varies by 2-5 % of the
// card around the modelled mean (catalog_facts.md Part 3), so a plan within
// 5 % may still run out of memory. vLLM plans have no default margin: their
// budget is gpu-util x capacity by design.
inline constexpr double k_low_headroom_share = 0.05;

// Setup: what the user asked for, field by field as the option table
// (options.hpp) parses it. Defaults match DESIGN.md §2; a field that is
// derived from the model, the card or other fields when left out is a
// std::optional (nullopt: "derive it"), or Quant::automatic for --quant auto.
// resolve() (setup/resolve.hpp) turns a Setup into a Resolved, which holds no
// unset values; memory() only accepts a Resolved.
struct Setup {
  // Hardware.
  int gpus = 1;   // GPUs per node (--gpus NxNAME)
  int nodes = 1;  // nodes, each with `gpus` GPUs
  // Workload.
  Mode mode = Mode::infer;
  Engine engine = Engine::hf;
  std::int64_t seq = 4096;    // tokens per sequence
  std::int64_t batch = 1;     // micro-batch per DP rank / concurrent sequences
  Dtype dtype = Dtype::bf16;  // compute dtype and unquantized weights
  Quant quant = Quant::automatic;  // weights; auto: the checkpoint's, qlora nf4
  std::optional<Dtype> kv_dtype{};  // nullopt: auto (= dtype)
  std::optional<int> tp{};  // nullopt: infer -> GPUs per node / pp, train -> 1
  int pp = 1;
  int cp = 1;  // context parallel: the sequence sharded over cp ranks
  bool split_layers = false;  // transformers device_map="auto"
  bool sequence_parallel = false;
  // Training.
  std::optional<int> zero{};  // ZeRO stage 0-3; nullopt: 3 with fsdp, else 0
  bool fsdp = false;          // sharded by FSDP FULL_SHARD (stage-3 semantics)
  // --fsdp-version: 1 FullyShardedDataParallel (flat parameters), 2
  // fully_shard; nullopt: 2.
  std::optional<int> fsdp_version{};
  Offload offload = Offload::none;
  Checkpointing checkpointing = Checkpointing::none;
  int checkpoint_every = 2;  // N of --checkpointing every-N
  Attn attn = Attn::flash;
  Precision precision = Precision::mixed;
  Optimizer optimizer = Optimizer::adamw;
  bool compile = false;
  bool float8 = false;        // torchao float8 linears (torchtitan)
  bool prepare_kbit = false;  // PEFT prepare_model_for_kbit_training
  int lora_rank = 16;
  unsigned lora_targets = k_lora_all;
  double lora_dropout = 0;   // PEFT LoraConfig.lora_dropout (default 0.0)
  bool untied_head = false;  // lm_head a copy of a tied embedding (LitGPT)
  bool optimizer_in_bwd = false;
  Loss loss = Loss::full;
  bool activation_offload = false;
  int grad_accum = 1;
  // --fsdp-no-sync: the micro-batches before the last run under FSDP's
  // no_sync() (FSDP2: set_requires_gradient_sync(False)), so every rank
  // accumulates unsharded gradients (HF Trainer, accelerate, Lightning).
  bool fsdp_no_sync = false;
  // --fsdp-frozen-grads: FSDP1 units flatten frozen weights together with
  // the adapters (use_orig_params=True), so the whole unit gets gradients.
  bool fsdp_frozen_grads = false;
  // --nf4-backend; nullopt: torchao under pure precision, else bnb.
  std::optional<Nf4Backend> nf4_backend{};
  // --use-cache: transformers' training forward builds its KV cache
  // (config use_cache=True under activation checkpointing other than
  // gradient_checkpointing_enable, which turns it off).
  bool use_cache = false;
  TrainObjective objective = TrainObjective::sft;
  // --precompute-ref: the reference log-probs computed once before training
  // (TRL precompute_ref_log_probs), so no reference model is held.
  bool precompute_ref = false;
  // --transformers-version (engine hf; nullopt: k_transformers_default).
  std::optional<Release> transformers_release{};
  // --torchtitan-version (nullopt: k_torchtitan_default).
  std::optional<Release> torchtitan_release{};
  // --litgpt-version (nullopt: k_litgpt_default).
  std::optional<Release> litgpt_release{};
  // --lm-head-chunk: tokens of the sequence per lm_head call (LitGPT
  // lm_head_chunk_size); 0: one call over the whole sequence.
  std::int64_t lm_head_chunk = 0;
  // AutoAWQ fused layers' cache length (tokens); 0: unfused (transformers'
  // AwqConfig default, do_fuse=False).
  std::int64_t awq_fused_len = 0;
  // --gptq-kernel (nullopt: what transformers picks, gptq_default_kernel).
  std::optional<GptqKernel> gptq_kernel{};
  // Serving (vLLM).
  double gpu_util = 0.9;  // gpu_memory_utilization
  std::optional<std::int64_t> max_num_batched_tokens{};  // vLLM's default
  bool enforce_eager = false;
  VllmEra vllm_version = VllmEra::current;
  // --vllm-version X.Y[.Z] (nullopt: the era's release, the default 0.19).
  std::optional<VllmVersion> vllm_release{};
  std::optional<std::int64_t> max_model_len{};  // nullopt: seq, capped
  std::optional<std::int64_t> max_num_seqs{};   // nullopt: vLLM's default
  P2p p2p = P2p::automatic;  // peer-to-peer between a node's GPUs
  // Overrides (nullopt: the measured defaults).
  std::optional<double> overhead_gib{};  // CUDA context, cuBLAS, NCCL per GPU
  std::optional<double> reserve{};       // fragmentation, share of allocated
  std::optional<double> price{};         // USD per GPU-hour
  // --min-headroom: the free memory a plan must keep to count as fitting, in
  // GiB or as a share of the card; nullopt: k_low_headroom_share (none for
  // vLLM, whose budget is gpu-util by design).
  std::optional<double> min_headroom_gib{};
  std::optional<double> min_headroom_share{};
  std::optional<double> host_ram_gib{};  // CPU RAM per node; nullopt: unknown
  // --framework, or the framework of the files `check` read; nullopt: not
  // stated (the advisor assumes default_framework(mode, engine)).
  std::optional<Framework> framework{};

  int total_gpus() const { return gpus * nodes; }
  bool training() const { return mode != Mode::infer; }
};

// A Setup with every default filled in for one model and card
// (setup/resolve.hpp resolve()): the only input memory() and estimate_time()
// accept. Same field names as Setup; nothing is unset, `quant` is never
// Quant::automatic and `zero` is the stage (3 under fsdp).
struct Resolved {
  // Hardware.
  int gpus = 1;
  int nodes = 1;
  // Workload.
  Mode mode = Mode::infer;
  Engine engine = Engine::hf;
  std::int64_t seq = 4096;
  std::int64_t batch = 1;
  Dtype dtype = Dtype::bf16;
  Quant quant = Quant::none;
  Dtype kv_dtype = Dtype::bf16;
  int tp = 1;
  int pp = 1;
  int cp = 1;  // context parallel: the sequence sharded over cp ranks
  bool split_layers = false;
  bool sequence_parallel = false;
  // Training.
  int zero = 0;
  bool fsdp = false;
  int fsdp_version = k_default_fsdp_version;  // 1 or 2 (fully_shard)
  Offload offload = Offload::none;
  Checkpointing checkpointing = Checkpointing::none;
  int checkpoint_every = 2;  // N of --checkpointing every-N
  Attn attn = Attn::flash;
  Precision precision = Precision::mixed;
  Optimizer optimizer = Optimizer::adamw;
  bool compile = false;
  bool float8 = false;        // torchao float8 linears (torchtitan)
  bool prepare_kbit = false;  // PEFT prepare_model_for_kbit_training
  int lora_rank = 16;
  unsigned lora_targets = k_lora_all;
  double lora_dropout = 0;   // PEFT LoraConfig.lora_dropout (default 0.0)
  bool untied_head = false;  // lm_head a copy of a tied embedding (LitGPT)
  bool optimizer_in_bwd = false;
  Loss loss = Loss::full;
  bool activation_offload = false;
  int grad_accum = 1;
  // Set only where they apply: FSDP with grad_accum > 1 (no_sync), LoRA
  // under FSDP1 (frozen grads).
  bool fsdp_no_sync = false;
  bool fsdp_frozen_grads = false;
  Nf4Backend nf4_backend = Nf4Backend::bnb;
  bool use_cache = false;  // set only where layers are checkpointed
  TrainObjective objective = TrainObjective::sft;
  // --precompute-ref: the reference log-probs computed once before training
  // (TRL precompute_ref_log_probs), so no reference model is held.
  bool precompute_ref = false;
  Release transformers_release = k_transformers_default;  // engine hf
  Release torchtitan_release = k_torchtitan_default;
  Release litgpt_release = k_litgpt_default;
  std::int64_t lm_head_chunk = 0;  // tokens per lm_head call; 0: one call
  // LitGPT >= 0.5.0 QLoRA: bitsandbytes' StableEmbedding, created after the
  // optimizer, trains outside it: its gradient is never stepped or freed.
  bool stable_embedding = false;
  // FSDP2 fully_shard without a MixedPrecisionPolicy under torch.autocast
  // (LitGPT >= 0.5.11 LoRA, bf16-mixed): fp32 parameters are gathered and
  // autocast casts them at every call, as without FSDP.
  bool fsdp_autocast = false;
  // torch.compile reaches the loss: --compile, except under torchtitan
  // before k_torchtitan_compiled_loss.
  bool compiled_loss = false;
  // engine hf inference with AWQ weights only; 0 otherwise.
  std::int64_t awq_fused_len = 0;
  // engine hf inference with GPTQ weights only; none otherwise.
  GptqKernel gptq_kernel = GptqKernel::none;
  // Serving (vLLM).
  double gpu_util = 0.9;
  std::int64_t max_num_batched_tokens = 8192;
  bool enforce_eager = false;
  VllmEra vllm_version = VllmEra::current;
  VllmVersion vllm_release = k_vllm_default_version;
  VllmEngine vllm_engine = VllmEngine::v1;  // the engine that release runs
  std::int64_t max_model_len = 4096;
  std::int64_t max_num_seqs = 256;
  bool p2p = false;  // --p2p resolved for this card and layout
  // Overrides the user gave (nullopt: the measured defaults apply).
  std::optional<double> overhead_gib{};
  std::optional<double> reserve{};
  std::optional<double> price{};
  Bytes min_headroom_bytes = 0;           // the margin, resolved on the card
  std::optional<Bytes> host_ram_bytes{};  // CPU RAM per node, when known

  int total_gpus() const { return gpus * nodes; }
  // Sequences of one example through the policy's forward with gradients:
  // TRL's concatenated_forward runs chosen and rejected as 2 x batch rows
  // (dpo_trainer.py, orpo_trainer.py, cpo_trainer.py); KTO's examples are
  // single completions (kto_trainer.py), its KL batch runs under no_grad.
  std::int64_t rows_per_example() const {
    return objective == TrainObjective::dpo ||
                   objective == TrainObjective::orpo ||
                   objective == TrainObjective::simpo
               ? 2
               : 1;
  }
  // A frozen reference model on the GPUs: DPO and KTO full fine-tuning
  // without precomputed log-probs. A PEFT policy is its own reference with
  // the adapters disabled (TRL null_ref_context, dpo_trainer.py).
  bool holds_reference() const {
    return runs_reference_forward() && mode == Mode::full;
  }
  // The reference log-probs computed every step (a forward under no_grad):
  // DPO and KTO unless precomputed (TRL compute_ref_log_probs).
  bool runs_reference_forward() const {
    return (objective == TrainObjective::dpo ||
            objective == TrainObjective::kto) &&
           !precompute_ref;
  }
  int dp() const { return total_gpus() / (tp * pp * cp); }
  bool training() const { return mode != Mode::infer; }
};

std::string_view mode_name(Mode mode);
std::string_view engine_name(Engine engine);
std::string_view offload_name(Offload offload);
std::string_view checkpointing_name(Checkpointing checkpointing);
// "every-2" for every with N = 2, else checkpointing_name().
std::string checkpointing_text(Checkpointing checkpointing, int every);
std::string_view attn_name(Attn attn);
std::string_view precision_name(Precision precision);
std::string_view optimizer_name(Optimizer optimizer);
std::string_view loss_name(Loss loss);
std::string_view objective_name(TrainObjective objective);
std::string_view vllm_era_name(VllmEra era);
// "none", "exllama", "exllamav2", "marlin", "cuda-old", "torch", "triton".
std::string_view gptq_kernel_name(GptqKernel kernel);
// "vllm", "deepspeed", "hf-trainer", "trl", "accelerate", "axolotl",
// "torchtune", "llama-factory", "megatron", "torchtitan", "generate".
std::string_view framework_name(Framework framework);
// nullopt when `name` is none of framework_name()'s.
std::optional<Framework> framework_from_name(std::string_view name);
// The framework a job runs on when none is stated: vLLM for --engine vllm,
// transformers generate for hf inference, HF Trainer for training.
Framework default_framework(Mode mode, Engine engine);

// Canonical names, in enum order (CLI11 IsMember, help, JSON).
std::vector<std::string_view> mode_names();
std::vector<std::string_view> engine_names();
std::vector<std::string_view> offload_names();
std::vector<std::string_view> checkpointing_names();
std::vector<std::string_view> attn_names();
std::vector<std::string_view> precision_names();
std::vector<std::string_view> optimizer_names();
std::vector<std::string_view> loss_names();
std::vector<std::string_view> objective_names();

// Name -> enum; REQUIRES `name` to be one of the canonical names (validated at
// the edge).
Mode mode_from_name(std::string_view name);
Engine engine_from_name(std::string_view name);
Offload offload_from_name(std::string_view name);
Checkpointing checkpointing_from_name(std::string_view name);
Attn attn_from_name(std::string_view name);
Precision precision_from_name(std::string_view name);
Optimizer optimizer_from_name(std::string_view name);
Loss loss_from_name(std::string_view name);
TrainObjective objective_from_name(std::string_view name);

// "qv", "attn", "all" or a comma list of q,k,v,o,gate,up,down -> bit set; 0
// when invalid.
unsigned lora_targets_from_text(std::string_view text);
// The projection names of a comma list, in bit order: q, k, v, o, gate, up,
// down.
std::vector<std::string_view> lora_target_names();
// Bit set -> "q,v" (canonical preset name when one matches: "qv", "attn",
// "all").
std::string lora_targets_text(unsigned targets);

// "0.19", "0.6.3" -> era; nullopt when unparsable.
std::optional<VllmEra> vllm_era_from_text(std::string_view text);
// The newest version of an era that vllm_era_from_text reads back to it
// ("0.6", "0.10"); "" for current.
std::string_view vllm_era_version(VllmEra era);
// The era of a release (<= 0.6 v0, 0.7 - 0.10 v1_early, >= 0.11 current).
VllmEra vllm_era_of(VllmVersion version);
// The release an era stands for when no number is given: 0.6 -> 0.6.x's
// newest, 0.10 -> 0.10.x's newest, current -> k_vllm_default_version.
VllmVersion vllm_era_release(VllmEra era);

}  // namespace oomplan
