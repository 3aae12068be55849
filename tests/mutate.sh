#!/usr/bin/env bash
# Mutation check: "if I changed this line, which test would go red?"
#
# Copies the tracked sources to a scratch folder, builds them once, then for
# each single-line mutation below: applies it, rebuilds incrementally, runs the
# whole suite (less the format check) and restores the line. A mutant that
# passes every test "survives": a rule or constant users depend on that no
# test pins down. The list holds mutations of rules and constants that change
# what users are told, not of every line.
#
#   bash tests/mutate.sh            # all mutants
#   bash tests/mutate.sh 3 7        # only mutants 3 and 7
#
# Not part of CI (a rebuild per mutant takes minutes); the last line reads
# "N mutants, M survived".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=${MUTATE_DIR:-${TMPDIR:-/tmp}/oomplan-mutate}
jobs=${MUTATE_JOBS:-2}

# file | exact text of the line (one occurrence) | replacement | what it breaks
mutants=$(cat <<'EOF'
src/memory/weights.cpp|  return quant == Quant::fp8 && m.checkpoint_quant == Quant::fp8 &&|  return false && quant == Quant::fp8 && m.checkpoint_quant == Quant::fp8 &&|DeepSeek-V3 block-scaled FP8 weights
src/setup/options.cpp|      if (!(value > 0 && value <= 1)) {|      if (false) {|--gpu-util range check
src/setup/validate.cpp|  if (s.engine == Engine::vllm && s.training()) {|  if (false) {|vLLM cannot train
include/oomplan/setup/setup.hpp|inline constexpr double k_low_headroom_share = 0.05;|inline constexpr double k_low_headroom_share = 0.50;|low-headroom warning threshold
src/memory/vllm.cpp|    base = gib_bytes(samples ? 0.25 : 0.07);|    base = gib_bytes(samples ? 0.45 : 0.07);|vLLM V1 non-torch memory (TP1)
src/memory/overhead.cpp|constexpr double k_train_reserve = 0.08;|constexpr double k_train_reserve = 0.09;|training allocator reserve
src/setup/validate.cpp|  if (s.engine == Engine::vllm && s.split_layers) {|  if (false) {|--split layers with vLLM
src/setup/validate.cpp|  if (r.split_layers && r.gpus > layers) {|  if (false) {|--split layers: more GPUs than layers
src/memory/kv_cache.cpp|    per_layer = 2 * heads * m.head_dim * bytes;|    per_layer = 1 * heads * m.head_dim * bytes;|KV cache holds K and V
src/memory/overhead.cpp|  return setup.reserve.value_or(0.05);|  return setup.reserve.value_or(0.04);|inference allocator reserve
src/memory/weights.cpp|      return params * (0.5 + 1.0 / 64.0 + 4.0 / (64.0 * 256.0));|      return params * (0.5 + 1.0 / 32.0 + 4.0 / (64.0 * 256.0));|NF4 block-64 absmax
src/memory/weights.cpp|      return params * (0.5 + 1.0 / 32.0);|      return params * (0.5 + 1.0 / 16.0);|MXFP4 scale per 32 values
src/memory/overhead.cpp|  Bytes bytes = 400 * k_mib;|  Bytes bytes = 500 * k_mib;|CUDA context size
include/oomplan/model/capability.hpp|inline constexpr int k_cc_ampere = 80;|inline constexpr int k_cc_ampere = 75;|flash attention / bf16 need sm80
include/oomplan/model/capability.hpp|inline constexpr int k_gpus_per_node = 8;|inline constexpr int k_gpus_per_node = 4;|8 GPUs per node
src/setup/vllm_engine.cpp|  return big_card(gpu) && !device_name_has(gpu, "a100") ? 8192 : 2048;|  return big_card(gpu) && !device_name_has(gpu, "a100") ? 8192 : 4096;|vLLM V1 default scheduler budget
src/setup/vllm_engine.cpp|    const bool chunked = max_model_len > 32768 && model.kv_lora_rank == 0 &&|    const bool chunked = max_model_len > 16384 && model.kv_lora_rank == 0 &&|vLLM V0 chunked prefill above 32k
src/setup/resolve.cpp|  r.zero = s.zero.value_or(s.fsdp ? 3 : 0);|  r.zero = s.zero.value_or(s.fsdp ? 2 : 0);|--fsdp is ZeRO stage 3
src/setup/validate.cpp|  if (model.num_heads > 0 && model.num_heads % r.tp != 0) {|  if (false) {|tp divides the attention heads
include/oomplan/plan/fix.hpp|inline constexpr double k_advise_headroom_share = 0.10;|inline constexpr double k_advise_headroom_share = 0.0;|fixes for tight plans
src/model/model.cpp|  return end / model.moe_every - from / model.moe_every;|  return end / model.moe_every - from / model.moe_every + 1;|MoE layers in a span
src/memory/vllm_vision.cpp|      vllm_release(0, 10, 0) <= version && version <= vllm_release(0, 11, 0);|      vllm_release(0, 10, 0) <= version && version < vllm_release(0, 11, 0);|0.11.0 pads encoder outputs to the budget
src/memory/vllm_vision.cpp|      (len * len + as_double(m.vision_intermediate_layers) * len * hv +|      (as_double(m.vision_intermediate_layers) * len * hv +|mllama's L x L attention mask
src/memory/vllm_vision.cpp|                      newer ? 1 : 0, newer ? 14 : 16);|                      newer ? 1 : 0, newer ? 16 : 16);|0.11's 14-frame video cap
src/advice/fit.cpp|  const bool offload_shown = without_offload < constraints.top;|  const bool offload_shown = without_offload < constraints.top - 1;|fit searches offload while it can rank in --top
src/advice/search.cpp|        out[d] = static_cast<std::uint8_t>(knobs[d].frugal);|        out[d] = 0;|the relaxation is a lower bound (side knobs frugal)
src/setup/options.cpp|  if (text == "false") {|  if (text == "0") {|a flag given =false is off
src/cli/common.cpp|    parse_flag(flag, text);|    (void)parse_flag(flag, text.substr(0, 0));|--json=256 is an error, not on
src/diagnose/explain.cpp|constexpr Bytes k_tiny_request = k_mib;|constexpr Bytes k_tiny_request = 1;|diagnose: tiny requests are not a lack of memory
src/diagnose/explain.cpp|  if (m.allowed_bytes && *n.r > *m.allowed_bytes) {|  if (false) {|diagnose: a request above the allocator limit
src/diagnose/anchors.cpp|       {"CUDA_ERROR_ILLEGAL_ADDRESS", "illegal memory access",|       {"CUDA_ERROR_ILLEGAL_ADDRESS_", "illegal memory access_",|diagnose: an earlier CUDA fault
src/memory/weights.cpp|  return (static_cast<double>(m.checkpoint_bytes) - stored) * here /|  return 0 * (static_cast<double>(m.checkpoint_bytes) - stored) * here /|safetensors index total_size of a quantized checkpoint
src/model/hf_quant_skip.cpp|      kept += named ? module.params : 0.0;|      kept += 0.0;|quantization_config modules left in bf16
src/diagnose/tf.cpp|      {"half", 16},|      {"half", 32},|TensorFlow half tensors are 2 bytes
include/oomplan/setup/setup.hpp|inline constexpr Release k_transformers_last_logits{4, 45, 0};|inline constexpr Release k_transformers_last_logits{4, 44, 0};|transformers 4.44 upcasts every position's logits
include/oomplan/setup/setup.hpp|inline constexpr Release k_transformers_one_cache{4, 42, 0};|inline constexpr Release k_transformers_one_cache{4, 41, 0};|transformers 4.41 decodes with tuple caches
src/memory/weights.cpp|  return pad.kernel == Mxfp4Kernel::triton ? experts / 32.0 : 0.0;|  return pad.kernel == Mxfp4Kernel::triton ? experts / 64.0 : 0.0;|vLLM Triton keeps MXFP4 scales before 0.21
src/memory/weights.cpp|    return CheckpointSizeUse::converted;|    return CheckpointSizeUse::as_stored;|index total_size unused when the run converts
src/memory/train_activations.cpp|  double rep = residual_stream_bytes(setup) * h / rep_div;|  double rep = dm.d * h / rep_div;|per-op SAC keeps the fp32 residual input
src/memory/hf_activations.cpp|           b * heads * seq * seq * (d + 8.0) + seq * seq * d;|           b * heads * seq * seq * (2.0 * d + 4.0) + seq * seq * d;|AutoAWQ's fp32 copy of the scores
src/memory/kv_cache.cpp|  const double rope = 2.0 * len * (hd / 2.0) * 8.0;|  const double rope = 0.0;|AutoAWQ's complex64 RoPE tables
src/setup/resolve.cpp|  r.awq_fused_len = fusable && !r.training() ? s.awq_fused_len : 0;|  r.awq_fused_len = fusable ? s.awq_fused_len : s.awq_fused_len;|--awq-fused-len needs AWQ inference
include/oomplan/setup/setup.hpp|inline constexpr Release k_transformers_distributed_config{5, 11, 0};|inline constexpr Release k_transformers_distributed_config{5, 18, 0};|transformers 5.17 spells TP DistributedConfig
src/model/hf_decoders.cpp|  const bool bias = s.root.flag("use_bias", true);|  const bool bias = s.root.flag("use_bias", true) && false;|StarCoder2 biases
src/model/hf_decoders.cpp|  if (s.root.flag("multi_query", true)) {|  if (s.root.flag("multi_query", false)) {|GPT-BigCode is multi-query by default
src/model/hf_decoders.cpp|              every == -2 ? 4 : every);|              every == -2 ? 2 : every);|OLMo 3 slides three layers in four
src/model/hf_decoders.cpp|  m.qkv_bias = s.root.flag("bias", true);|  m.qkv_bias = s.root.flag("bias", false);|InternLM2Config's bias defaults to true
src/launch/writers.cpp|  constexpr std::array<std::string_view, 2> k_types = {"internlm2", "kimi_k2"};|  constexpr std::array<std::string_view, 2> k_types = {"internlm2", "kimi_k2_"};|Kimi K2 loads with trust_remote_code
src/launch/lora_modules.cpp|  if (model_type == "phi3") {|  if (model_type == "phi3_") {|Phi-3's fused qkv_proj / gate_up_proj LoRA names
src/launch/lora_modules.cpp|    {"fc_out", k_lora_down},|    {"fc_out", k_lora_up},|GPT-J's fc_out is the down projection
src/launch/writers.cpp|    if (covered != m.targets) {|    if (false) {|LoRA on part of a fused module: no launch block, and why
include/oomplan/setup/setup.hpp|inline constexpr Release k_torchtitan_compiled_loss{0, 1, 0};|inline constexpr Release k_torchtitan_compiled_loss{0, 0, 0};|torchtitan before 0.1 leaves the loss eager
src/setup/resolve.cpp|      s.compile && !(s.framework == Framework::torchtitan &&|      s.compile && !(s.framework != Framework::torchtitan &&|only torchtitan compiles the blocks without the loss
src/launch/writers.cpp|    if (remote_code(model)) {|    if (false) {|no transformers TP line for remote modeling code
src/advice/search.cpp|    if (expresses(start)) {|    if (false) {|a pure-bf16 framework's search is bounded by what it can express
src/advice/advice.cpp|                       (r.mode == Mode::lora && r.quant == Quant::none))) {|                       (false))) {|LoRA over a 16-bit base is offered QLoRA
src/launch/launch.cpp|    if ((mode == "lora"|    if ((mode == "lora-x"|axolotl LoRA is mixed precision on the CLI too
src/memory/train_activations.cpp|          .qkv_in = drop ? qkv : (qkv > 0 ? 1.0 : 0.0),|          .qkv_in = (qkv > 0 ? 1.0 : 0.0),|LoRA dropout: each adapter its own input copy
src/memory/train_activations.cpp|  rep += (needs.qkv_masks + needs.up_masks) * h;|  rep += (needs.qkv_masks) * h;|LoRA dropout masks on gate/up inputs
src/memory/train_activations.cpp|  const double down_extra = needs.down_copies * d + needs.down_masks;|  const double down_extra = needs.down_copies * d;|LoRA dropout mask on down_proj's input
src/launch/writers.cpp|  } else if (!ds && s.dtype != Dtype::fp32 && adapters &&|  } else if (!ds && s.dtype != Dtype::fp32 && !adapters &&|axolotl writes PEFT's fp32 adapters (mixed)
src/setup/resolve.cpp|? s.lora_dropout : 0.0;|? s.lora_dropout : s.lora_dropout;|a full fine-tune has no LoRA dropout
src/advice/capability.cpp|  c.activation_offload = true;  // use_unsloth_gc|  c.activation_offload = false;  // use_unsloth_gc|LLaMA-Factory offloads layer inputs (use_unsloth_gc)
src/memory/train_states.cpp|  return setup.fsdp_no_sync ? params * element_bytes : sharded;|  return setup.fsdp_no_sync ? sharded + 0 * params * element_bytes : sharded;|FSDP no_sync keeps unsharded gradients
src/memory/train_states.cpp|  return setup.fsdp_frozen_grads ? at.layer_params / at.t + tw.trainable|  return setup.fsdp_frozen_grads ? 0 * at.layer_params / at.t + tw.trainable|FSDP1 frozen grads cover the whole layers
src/memory/train_activations.cpp|  if (setup.mode == Mode::qlora && setup.nf4_backend == Nf4Backend::bnb) {|  if (setup.mode == Mode::qlora && setup.nf4_backend != Nf4Backend::bnb) {|bitsandbytes NF4 saves projection inputs
src/launch/writers.cpp|  if (s.fsdp && s.grad_accum > 1 && !s.fsdp_no_sync) {|  if (s.fsdp && s.grad_accum > 1 && s.fsdp_no_sync) {|HF launch blocks write sync_each_batch
src/advice/knobs.cpp|           [](Setup& s) { s.fsdp_no_sync = false; }}};|           [](Setup& s) { s.fsdp_no_sync = true; }}};|the sync_each_batch fix turns no_sync off
src/memory/train_activations.cpp|  if (!setup.use_cache) {|  if (true) {|use_cache keeps the training KV cache
src/memory/memory.cpp|  if (setup.untied_head && model.tie_word_embeddings) {|  if (false) {|--untied-head loads a second head
src/launch/hf_shared.cpp|    set_option(plan, "--fsdp-no-sync", *each ? "false" : "true",|    set_option(plan, "--fsdp-no-sync", *each ? "true" : "false",|sync_each_batch read as --fsdp-no-sync false
src/setup/resolve.cpp|  r.fsdp_no_sync = s.fsdp_no_sync && s.fsdp && s.grad_accum > 1 &&|  r.fsdp_no_sync = s.fsdp_no_sync && s.fsdp &&|no_sync matters only with accumulation
src/setup/resolve.cpp|      r.mode == Mode::qlora && r.litgpt_release >= k_litgpt_stable_embedding;|      r.mode == Mode::qlora && r.litgpt_release < k_litgpt_stable_embedding;|LitGPT's StableEmbedding from 0.5.0
src/setup/resolve.cpp|    r.checkpointing = Checkpointing::full;|    r.checkpointing = Checkpointing::none;|LitGPT checkpoints every Block on several devices
src/setup/resolve.cpp|  r.fsdp_autocast = r.fsdp_version == 2 && r.precision == Precision::amp;|  r.fsdp_autocast = r.fsdp_version == 1 && r.precision == Precision::amp;|LitGPT's FSDP2 keeps autocast casts, FSDP1 gathers bf16
src/memory/buffers.cpp|  const bool frozen_head = setup.mode != Mode::full;|  const bool frozen_head = setup.mode == Mode::full;|a frozen head is cast at every lm_head call
src/memory/train.cpp|    p.buffers += x.cast.layer - x.cast.head;|    p.buffers += x.cast.layer;|no head copies inside a checkpointed layer's forward
src/memory/train_states.cpp|  return setup.stable_embedding && at.first ? at.embed * at.d / at.t : 0.0;|  return setup.stable_embedding && at.first ? at.embed * at.d / at.t / 2 : 0.0;|the StableEmbedding gradient is vocab x hidden in the weight's dtype
src/setup/validate.cpp|      s.total_gpus() > 1) {|      s.total_gpus() > 2) {|LitGPT refuses QLoRA on more than one device
src/advice/knobs.cpp|      (k.r.precision != Precision::mixed && k.r.precision != Precision::amp)) {|      (k.r.precision != Precision::mixed && k.r.precision != Precision::mixed)) {|amp -> pure bf16 is a fix
src/advice/knobs.cpp|  KnobRow{"activation checkpointing",   Jobs::training,     KnobScope::plain,    KnobRole::side,   Frugal::second,  Risk::none,     &C::full_checkpoint,       checkpointing},|  KnobRow{"activation checkpointing",   Jobs::training,     KnobScope::plain,    KnobRole::side,   Frugal::second,  Risk::none,     nullptr,                  checkpointing},|LitGPT has no checkpointing knob on one device
src/launch/writers.cpp|      s.batch, s.batch * s.grad_accum * s.dp(), s.seq);|      s.batch, s.batch * s.grad_accum, s.seq);|LitGPT's global batch counts every device
src/launch/litgpt.cpp|  const std::int64_t per_rank = global / (*s.devices * s.nodes);|  const std::int64_t per_rank = global / *s.devices;|LitGPT's global batch spans every node
src/launch/litgpt.cpp|      into[item.key()] = item.value();|      into[item.key()] = into.contains(item.key()) ? into[item.key()] : item.value();|a LitGPT --config replaces the flags before it
src/launch/litgpt.cpp|             base.find("full") != std::string_view::npos) {|             base.find("full") == std::string_view::npos) {|config_hub's full.yaml is finetune_full
src/memory/hf_activations.cpp|                                  l.out * 2048.0 * 8.0 * 4.0 + 128.0);|                                  l.out * 2048.0 * 8.0 * 2.0 + 128.0);|exllamav2 keeps 2048 x 8 fp32 rows per output column
src/setup/resolve.cpp|    return GptqKernel::exllama;|    return GptqKernel::exllamav2;|transformers before 4.49 runs AutoGPTQ's exllama v1
src/advice/knobs.cpp|  if (gptqmodel && k.gpu.vendor == "NVIDIA" && !below(k.gpu, k_cc_ampere)) {|  if (gptqmodel && k.gpu.vendor == "NVIDIA") {|Marlin needs compute capability 8.0
src/memory/hf_activations.cpp|             rows >= 1024 &&|             rows >= 2048 &&|AutoAWQ's GEMM dequantizes from 1,024 rows
EOF
)

only=" $* "
echo "== scratch copy in $scratch"
rm -rf "$scratch"
mkdir -p "$scratch"
git ls-files -z | xargs -0 -I{} cp --parents {} "$scratch"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
echo "== baseline build and suite"
cmake --build "$scratch/build" -j"$jobs" --target oomplan_tests oomplan >/dev/null
"$scratch/build/tests/oomplan_tests" -a >/dev/null || {
  echo "the unmutated suite fails; fix it first" >&2
  exit 1
}

total=0
survived=0
index=0
while IFS='|' read -r file original replacement what; do
  [ -n "$file" ] || continue
  index=$((index + 1))
  if [ "$only" != "  " ] && [[ "$only" != *" $index "* ]]; then
    continue
  fi
  total=$((total + 1))
  path="$scratch/$file"
  count=$(grep -cF -- "$original" "$path" || true)
  if [ "$count" != 1 ]; then
    echo "mutant $index ($what): '$original' occurs $count times in $file; update the list" >&2
    exit 1
  fi
  cp "$path" "$path.orig"
  ORIGINAL="$original" REPLACEMENT="$replacement" python3 - "$path" <<'PY'
import os, sys
path = sys.argv[1]
text = open(path).read()
open(path, "w").write(text.replace(os.environ["ORIGINAL"], os.environ["REPLACEMENT"], 1))
PY
  verdict="killed"
  if ! cmake --build "$scratch/build" -j"$jobs" --target oomplan_tests oomplan >/dev/null 2>&1; then
    verdict="killed (does not build)"
  elif "$scratch/build/tests/oomplan_tests" -a >/dev/null 2>&1; then
    verdict="SURVIVED"
    survived=$((survived + 1))
  fi
  printf '%2d  %-44s %s\n' "$index" "$what" "$verdict"
  mv "$path.orig" "$path"
  touch "$path"
done <<<"$mutants"
rm -rf "$scratch"
echo "$total mutants, $survived survived"
