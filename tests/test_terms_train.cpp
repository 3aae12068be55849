// The training memory terms one by one (src/memory/train_states.cpp,
// train_activations.cpp, train_loss.cpp, buffers.cpp), each against a hand
// calculation in its comment. Llama-2-7B unless said otherwise: h 4,096, 32
// layers of 202,383,360 parameters, I 11,008, 32,000-token vocabulary,
// 6,738,415,616 parameters; one sequence of 4,096 tokens in bf16.

#include "memory/internal.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

namespace {

using namespace oomplan;
using namespace oomplan::memory_terms;
using test::llama2_7b;

Resolved full(int gpus = 1) {
  Resolved s;
  s.mode = Mode::full;
  s.gpus = gpus;
  s.seq = 4096;
  return s;
}

Resolved lora() {
  Resolved s = full();
  s.mode = Mode::lora;
  return s;
}

TrainLayout layout(const Resolved& s, int stage = 0) {
  const Model m = llama2_7b();
  return train_layout(m, s, count_params(m), stage);
}

Dims dims(const Resolved& s) {
  return train_dims(llama2_7b(), s);
}

Model moe_model() {
  Model m = llama2_7b();
  m.num_experts = 8;
  m.experts_per_tok = 2;
  m.moe_intermediate_size = 1024;
  return m;
}

}  // namespace

// --- train_states.cpp

TEST_CASE("terms: ZeRO shards by stage, offload and precision predicates",
          "[terms]") {
  Resolved s = full(8);
  s.zero = 2;
  CHECK(zero_shards(s, 1, 8) == 8.0);  // states
  CHECK(zero_shards(s, 2, 8) == 8.0);  // gradients
  CHECK(zero_shards(s, 3, 8) == 1.0);  // weights stay whole
  s.offload = Offload::params;
  CHECK_FALSE(offloads_params(s));  // parameters offload only at ZeRO-3
  CHECK_FALSE(offloads_optimizer(s));
  s.zero = 3;
  CHECK(offloads_params(s));
  s.offload = Offload::all;
  CHECK(offloads_optimizer(s));
  CHECK(mixed16(s));
  s.dtype = Dtype::fp32;
  CHECK_FALSE(mixed16(s));
  s.dtype = Dtype::bf16;
  s.precision = Precision::pure;
  CHECK_FALSE(mixed16(s));
}

TEST_CASE("terms: lora_layer_params is rank x (in + out) per target",
          "[terms]") {
  // r 16, all targets: q, k, v, o 4 x 16 x (4,096 + 4,096) = 524,288; gate,
  // up, down 3 x 16 x (4,096 + 11,008) = 724,992: 1,249,280.
  const Resolved s = lora();
  CHECK(lora_layer_params(llama2_7b(), s, false) == 1249280.0);
  Resolved qv = s;
  qv.lora_targets = k_lora_q | k_lora_v;
  CHECK(lora_layer_params(llama2_7b(), qv, false) == 262144.0);
  // MoE: 8 experts x 3 x 16 x (4,096 + 1,024) = 1,966,080 beside attention's
  // 524,288: 2,490,368.
  CHECK(lora_layer_params(moe_model(), s, true) == 2490368.0);
  // 32 layers alike: 32 x 1,249,280 = 39,976,960.
  CHECK(adapter_params(llama2_7b(), s, 0, 32) == 39976960.0);
}

TEST_CASE("terms: stage_norm_params and the kbit fp32 upcast", "[terms]") {
  Resolved s = lora();
  s.mode = Mode::qlora;
  s.quant = Quant::nf4;
  const TrainLayout at = layout(s);
  // (2 x 32 layers + the final norm) x 4,096 = 266,240.
  CHECK(stage_norm_params(llama2_7b(), at) == 266240.0);
  CHECK(kbit_fp32_upcast_bytes(llama2_7b(), s, at) == 0.0);
  // prepare_model_for_kbit_training: embedding and lm_head (2 x 131,072,000)
  // and the norms (266,240) go from 2 to 4 B: 262,410,240 x 2 =
  // 524,820,480 B.
  s.prepare_kbit = true;
  CHECK(kbit_fp32_upcast_bytes(llama2_7b(), s, at) == 524820480.0);
}

TEST_CASE("terms: frozen_base_bytes is the base as loaded, ZeRO-3 sharded",
          "[terms]") {
  // LoRA on a bf16 base: 6,738,415,616 x 2 B = 13,476,831,232 B.
  Resolved s = lora();
  CHECK(frozen_base_bytes(llama2_7b(), s, layout(s)) == 13476831232.0);
  // amp loads it in fp32: 26,953,662,464 B.
  s.precision = Precision::amp;
  CHECK(frozen_base_bytes(llama2_7b(), s, layout(s)) == 26953662464.0);
  // ZeRO-3 over 4 GPUs: 13,476,831,232 / 4 = 3,369,207,808 B.
  s = lora();
  s.gpus = 4;
  s.zero = 3;
  CHECK(frozen_base_bytes(llama2_7b(), s, layout(s)) == 3369207808.0);
}

TEST_CASE("terms: trained_weights for full fine-tuning and LoRA", "[terms]") {
  // Full: all 6,738,415,616 parameters train, 13,476,831,232 B on the GPU.
  Resolved s = full();
  const TrainWeights f = trained_weights(llama2_7b(), s, layout(s));
  CHECK(f.trainable == 6738415616.0);
  CHECK(f.gpu == 13476831232.0);
  CHECK(f.host == 0.0);
  // LoRA: the base + 39,976,960 fp32 adapters (159,907,840 B) =
  // 13,636,739,072 B.
  s = lora();
  const TrainWeights l = trained_weights(llama2_7b(), s, layout(s));
  CHECK(l.trainable == 39976960.0);
  CHECK(l.trainable_bytes == 4.0);
  CHECK(l.gpu == 13636739072.0);
  // ZeRO-3 parameter offload over 4 GPUs: 13,476,831,232 / 4 to the host.
  s = full(4);
  s.zero = 3;
  s.offload = Offload::params;
  const TrainWeights o = trained_weights(llama2_7b(), s, layout(s));
  CHECK(o.gpu == 0.0);
  CHECK(o.host == 3369207808.0);
}

TEST_CASE("terms: gradient_element_bytes and stage_gradients", "[terms]") {
  Resolved s = full(8);
  const TrainWeights tw = trained_weights(llama2_7b(), s, layout(s));
  CHECK(gradient_element_bytes(s, tw) == 2.0);  // bf16
  s.zero = 1;  // DeepSpeed's BF16_Optimizer keeps fp32 gradients
  CHECK(deepspeed_bf16_optimizer(s));
  CHECK(gradient_element_bytes(s, tw) == 4.0);
  s.zero = 2;
  CHECK_FALSE(deepspeed_bf16_optimizer(s));
  // ZeRO-2 over 8: 6,738,415,616 x 2 B / 8 = 1,684,603,904 B.
  CHECK(stage_gradients(s, 6738415616.0, 2, 8).gpu == 1684603904.0);
  s.offload = Offload::optimizer;  // ZeRO-Offload streams them to the host
  const Placed off = stage_gradients(s, 6738415616.0, 2, 8);
  CHECK(off.gpu == 0.0);
  CHECK(off.host == 1684603904.0);
}

TEST_CASE("terms: FSDP1 frozen grads and no_sync accumulation", "[terms]") {
  // LitGPT <= 0.5.7 LoRA: FSDP1 wraps each Block with its adapters
  // (use_orig_params=True), and fabric.no_backward_sync keeps unsharded
  // gradients. Llama-2-7B, rank 8 on q and v, pure bf16, 2 GPUs.
  Resolved s = lora();
  s.gpus = 2;
  s.fsdp = true;
  s.fsdp_version = 1;
  s.zero = 3;
  s.precision = Precision::pure;
  s.lora_rank = 8;
  s.lora_targets = k_lora_q | k_lora_v;
  const TrainLayout at = layout(s);
  const TrainWeights tw = trained_weights(llama2_7b(), s, at);
  // Adapters: 32 x 2 x 8 x (4,096 + 4,096) = 4,194,304 (LitGPT's table
  // prints "Trainable parameters 4,194,304").
  CHECK(gradient_params(s, at, tw) == 4194304.0);
  s.fsdp_frozen_grads = true;
  // Every layer: 32 x 202,383,360 = 6,476,267,520, + the final norm 4,096
  // (the stage's layer term), + the adapters = 6,480,465,920.
  const double params = gradient_params(s, at, tw);
  CHECK(params == 6480465920.0);
  // Sharded over 2 in bf16: 6,480,465,920 B; no_sync keeps them unsharded:
  // 12,960,931,840 B on each GPU.
  const double sharded = stage_gradients(s, params, 2, 2).gpu;
  CHECK(sharded == 6480465920.0);
  CHECK(accumulated_gradient_bytes(s, params, 2, sharded) == sharded);
  s.fsdp_no_sync = true;
  CHECK(accumulated_gradient_bytes(s, params, 2, sharded) == 12960931840.0);
}

TEST_CASE("terms: optimizer state bytes per parameter", "[terms]") {
  Resolved s = full();
  CHECK(master_bytes_per_param(s) == 4.0);  // fp32 master, mixed bf16
  CHECK(master_bytes_per_param(lora()) == 0.0);
  CHECK(state_bytes_per_param(s, 4096) == 8.0);  // fp32 m, v
  s.precision = Precision::pure;
  CHECK(master_bytes_per_param(s) == 0.0);
  CHECK(state_bytes_per_param(s, 4096) == 4.0);  // bf16 m, v
  s.optimizer = Optimizer::adamw_8bit;
  // 2 x (1 B + 4 B / 256) = 2.03125 B.
  CHECK(state_bytes_per_param(s, 4096) == 2.03125);
  s.optimizer = Optimizer::paged_adamw;
  CHECK(paged(s.optimizer));
  CHECK(state_bytes_per_param(s, 4096) == 8.0);
  s.optimizer = Optimizer::sgd;
  CHECK(state_bytes_per_param(s, 4096) == 2.0);
  s.optimizer = Optimizer::adafactor;
  CHECK(state_bytes_per_param(s, 4096) == 8.0 / 4096);  // 2 x 4 B / h
}

TEST_CASE("terms: optimizer_states on the GPU, paged or on the host",
          "[terms]") {
  Resolved s = full(4);
  // 10^9 trainable x (4 master + 8 states) = 12 x 10^9 B; ZeRO-1 over 4:
  // 3 x 10^9.
  CHECK(optimizer_states(llama2_7b(), s, 1e9, 4).gpu == 12e9);
  s.zero = 1;
  CHECK(optimizer_states(llama2_7b(), s, 1e9, 4).gpu == 3e9);
  // Paged AdamW: the master copy stays (4 x 10^9 B), 8 x 10^9 B are paged.
  s = full();
  s.optimizer = Optimizer::paged_adamw;
  const Placed paged_states = optimizer_states(llama2_7b(), s, 1e9, 1);
  CHECK(paged_states.gpu == 4e9);
  CHECK(paged_states.paged == 8e9);
  // CPU Adam: 12 x 10^9 B + the fp32 gradient copy 4 x 10^9 B on the host.
  s = full();
  s.offload = Offload::optimizer;
  const Placed host = optimizer_states(llama2_7b(), s, 1e9, 1);
  CHECK(host.gpu == 0.0);
  CHECK(host.host == 16e9);
}

TEST_CASE("terms: gradients kept before backward and alive at the step",
          "[terms]") {
  Resolved s = full();
  CHECK(kept_gradient_bytes(s, 1000) == 1000.0);  // flat mixed buffer
  s.precision = Precision::pure;
  CHECK(kept_gradient_bytes(s, 1000) == 0.0);  // set_to_none
  s.grad_accum = 4;
  CHECK(kept_gradient_bytes(s, 1000) == 1000.0);  // earlier micro-batches
  // The largest trainable tensor: the 32,000 x 4,096 embedding =
  // 131,072,000 (MLP matrices are 4,096 x 11,008 = 45,088,768); LoRA's
  // largest adapter 16 x 11,008 = 176,128.
  s = full();
  CHECK(largest_trainable_param(llama2_7b(), s, layout(s)) == 131072000.0);
  CHECK(largest_trainable_param(llama2_7b(), lora(), layout(lora())) ==
        176128.0);
  // Optimizer in backward: one parameter's gradient, 131,072,000 x 2 B.
  CHECK(step_gradient_bytes(s, 13e9, 131072000, 2) == 13e9);
  s.optimizer_in_bwd = true;
  CHECK(step_gradient_bytes(s, 13e9, 131072000, 2) == 262144000.0);
  // The lm_head's gradient on the last stage: 131,072,000 x 2 B.
  CHECK(output_projection_gradient_bytes(full(), layout(full()), 13e9, 2) ==
        262144000.0);
  CHECK(output_projection_gradient_bytes(lora(), layout(lora()), 13e9, 4) ==
        0.0);
}

TEST_CASE("terms: optimizer temporaries of the step", "[terms]") {
  Resolved s = full();
  CHECK(adamw_8bit_dequant_bytes(s, 131072000) == 0.0);
  // 8-bit AdamW dequantizes one parameter's m and v: 8 B x 131,072,000.
  s.optimizer = Optimizer::adamw_8bit;
  CHECK(adamw_8bit_dequant_bytes(s, 131072000) == 1048576000.0);
  // DeepSpeed ZeRO-2 over 8 casts its partition to fp32: 4 B x 4 x 10^9 / 8
  // = 2 x 10^9 B; ZeRO-3 one sub-group of 10^9 at a time: 4 x 10^9 B.
  s = full(8);
  s.zero = 2;
  CHECK(deepspeed_fp32_grad_bytes(s, 4e9, 8) == 2e9);
  s.zero = 3;
  CHECK(deepspeed_fp32_grad_bytes(s, 16e9, 8) == 4e9);
  s.fsdp = true;  // FSDP steps on its own gradients
  CHECK(deepspeed_fp32_grad_bytes(s, 16e9, 8) == 0.0);
}

TEST_CASE("terms: paged_state_split spills what the device has no room for",
          "[terms]") {
  CHECK(paged_state_split(10, 4).device == 4);
  CHECK(paged_state_split(10, 4).host == 6);
  CHECK(paged_state_split(3, 4).device == 3);
  CHECK(paged_state_split(3, 4).host == 0);
}

// --- train_activations.cpp

TEST_CASE("terms: train_dims shards tokens over context parallel ranks",
          "[terms]") {
  Resolved s = full(8);
  s.batch = 2;
  s.cp = 2;
  s.tp = 2;
  s.sequence_parallel = true;
  const Dims dm = dims(s);
  CHECK(dm.tokens == 4096.0);  // 2 x 4,096 / cp 2
  CHECK(dm.cp == 2.0);
  CHECK(dm.t == 2.0);
  CHECK(dm.sp);
  CHECK(dm.d == 2.0);
}

TEST_CASE("terms: needs_of says which inputs a layer keeps", "[terms]") {
  CHECK(targeted(k_lora_all, k_lora_q | k_lora_k | k_lora_v) == 3.0);
  CHECK(targeted(k_lora_q | k_lora_v, k_lora_q | k_lora_k | k_lora_v) == 2.0);
  Resolved s = full();
  CHECK_FALSE(amp_compute(s));
  CHECK(needs_of(s).norm_weight);
  CHECK(needs_of(s).qkv_in == 1.0);
  // amp: q, k, v save three 16-bit copies, gate and up two.
  s.precision = Precision::amp;
  CHECK(amp_compute(s));
  CHECK(needs_of(s).qkv_in == 3.0);
  CHECK(needs_of(s).up_in == 2.0);
  // PEFT LoRA (fp32 adapters) on q and v: two copies, no o/up/down input.
  Resolved qv = lora();
  qv.lora_targets = k_lora_q | k_lora_v;
  const Needs a = adapter_needs(qv);
  CHECK_FALSE(a.norm_weight);
  CHECK(a.qkv_in == 2.0);
  CHECK_FALSE(a.o_in);
  CHECK(a.up_in == 0.0);
  // torchtune (pure): the adapters share one input.
  qv.precision = Precision::pure;
  CHECK(adapter_needs(qv).qkv_in == 1.0);
  // QLoRA with prepare_model_for_kbit_training, all targets: 3 + 3 q/k/v
  // copies, 2 + 2 gate/up, one more for down, fp32 MLP tensors.
  Resolved q = lora();
  q.mode = Mode::qlora;
  q.prepare_kbit = true;
  const Needs k = qlora_mixed_needs(q);
  CHECK(k.qkv_in == 6.0);
  CHECK(k.up_in == 4.0);
  CHECK(k.down_copies == 1.0);
  CHECK(k.mlp_bytes == 4.0);
  q.prepare_kbit = false;
  CHECK(qlora_mixed_needs(q).qkv_in == 1.0);
}

TEST_CASE("terms: LoRA dropout keeps a copy and a mask per adapter",
          "[terms]") {
  // peft lora/layer.py: each adapted projection drops out its own input
  // (nn.Dropout per adapter), lora_A saves the dropped copy and
  // native_dropout a 1-byte mask.
  Resolved qv = lora();
  qv.lora_targets = k_lora_q | k_lora_v;
  qv.precision = Precision::pure;
  const Dims dm = dims(qv);
  const double before = layer_activation_bytes(llama2_7b(), qv, dm, false);
  qv.lora_dropout = 0.05;
  const Needs n = needs_of(qv);
  CHECK(n.qkv_in == 2.0);  // no longer the one shared input
  CHECK(n.qkv_masks == 2.0);
  CHECK(n.up_masks == 0.0);
  // Pure bf16 on q and v: one more 2 B copy of the 4,096-wide input and two
  // 1 B masks: 8,192 + 8,192 = 16,384 B per token; x 4,096 tokens =
  // 67,108,864 B per layer.
  CHECK(layer_activation_bytes(llama2_7b(), qv, dm, false) - before ==
        67108864.0);
  // PEFT's fp32 adapters (mixed) on every projection already keep one copy
  // each; dropout adds the masks only: q, k, v, gate, up 5 x 4,096 + o 4,096
  // + down 11,008 = 35,584 B per token; x 4,096 = 145,752,064 B per layer.
  Resolved all = lora();
  const double mixed = layer_activation_bytes(llama2_7b(), all, dm, false);
  all.lora_dropout = 0.1;
  CHECK(layer_activation_bytes(llama2_7b(), all, dm, false) - mixed ==
        145752064.0);
  // A full fine-tune has no adapters.
  Resolved f = full();
  f.lora_dropout = 0.05;
  CHECK(needs_of(f).qkv_masks == 0.0);
}

TEST_CASE("terms: bitsandbytes NF4 saves every frozen projection's input",
          "[terms]") {
  // QLoRA on q and v in pure bf16 (LitGPT bf16-true + bnb.nf4). torchao's
  // linear_nf4 saves only the weight, so the base keeps no input; bnb's
  // MatMul4Bit keeps o_proj's, the MLP's and down_proj's inputs too:
  // (4,096 + 4,096 + 11,008) x 2 B = 38,400 B per token; x 4,096 tokens =
  // 157,286,400 B per layer.
  Resolved q = lora();
  q.mode = Mode::qlora;
  q.precision = Precision::pure;
  q.lora_targets = k_lora_q | k_lora_v;
  q.nf4_backend = Nf4Backend::torchao;
  const Dims dm = dims(q);
  const double torchao = layer_activation_bytes(llama2_7b(), q, dm, false);
  q.nf4_backend = Nf4Backend::bnb;
  CHECK(layer_activation_bytes(llama2_7b(), q, dm, false) - torchao ==
        157286400.0);
  // With dropout 0.05 each of q and v adds its dropped copy (2 x 8,192 B)
  // and a mask (2 x 4,096 B) on top of the shared input: 24,576 B per token
  // = 100,663,296 B per layer.
  const double bnb = layer_activation_bytes(llama2_7b(), q, dm, false);
  q.lora_dropout = 0.05;
  CHECK(needs_of(q).qkv_in == 3.0);
  CHECK(layer_activation_bytes(llama2_7b(), q, dm, false) - bnb == 100663296.0);
}

TEST_CASE("terms: the KV cache a training forward keeps under use_cache",
          "[terms]") {
  // Llama-2-7B (32 KV heads x 128 = 4,096 wide) at 4,096 tokens in bf16:
  // keys and values of 32 layers, 2 x 4,096 x 4,096 x 2 B x 32 =
  // 2,147,483,648 B, held to the end of forward.
  Resolved s = lora();
  s.checkpointing = Checkpointing::full;
  CHECK(training_kv_cache_bytes(llama2_7b(), s, layout(s)) == 0.0);
  s.use_cache = true;
  CHECK(training_kv_cache_bytes(llama2_7b(), s, layout(s)) == 2147483648.0);
}

TEST_CASE("terms: norm_saved, dropout and eager scores", "[terms]") {
  const Resolved s = full();
  // RMSNorm in eager: the fp32 input (4 B) + the normalised bf16 copy (2 B).
  CHECK(norm_saved(llama2_7b(), s, needs_of(s), 2) == 6.0);
  CHECK(norm_saved(llama2_7b(), lora(), needs_of(lora()), 2) == 4.0);
  Model ln = llama2_7b();
  ln.norm = NormKind::layer_norm;
  CHECK(norm_saved(ln, s, needs_of(s), 2) == 2.0);  // its input only
  CHECK_FALSE(has_dropout(llama2_7b()));
  Model gpt2 = llama2_7b();
  gpt2.model_type = "gpt2";
  CHECK(has_dropout(gpt2));
  CHECK(layer_scores_bytes(llama2_7b(), s, dims(s)) == 0.0);  // flash
  // eager: 4,096 tokens x 32 heads x 4,096 x (4 B fp32 softmax + 2 B cast)
  // = 3,221,225,472 B.
  Resolved eager = s;
  eager.attn = Attn::eager;
  CHECK(layer_scores_bytes(llama2_7b(), eager, dims(eager)) == 3221225472.0);
}

TEST_CASE("terms: a Llama layer's saved tensors per token", "[terms]") {
  const Resolved s = full();
  const Dims dm = dims(s);
  // Replicated: 2 norms x 6 B x 4,096 + q/k/v input 2 x 4,096 + gate/up
  // input 2 x 4,096 = 49,152 + 8,192 + 8,192 = 65,536 B.
  CHECK(replicated_saved_bytes(llama2_7b(), s, dm) == 65536.0);
  // Attention (flash): q, k, v 3 x 4,096 x 2 B + output 8,192 + o_proj input
  // 8,192 = 40,960 B.
  CHECK(attention_saved_bytes(llama2_7b(), s, dm) == 40960.0);
  // SwiGLU: gate, act, up, product 4 x 11,008 x 2 B = 88,064 B; compiled
  // (act recomputed) 66,048 B.
  CHECK(mlp_saved_bytes(llama2_7b(), s, dm, 11008) == 88064.0);
  Resolved compiled = s;
  compiled.compile = true;
  CHECK(mlp_saved_bytes(llama2_7b(), compiled, dm, 11008) == 66048.0);
  // MoE: router 8 x 8 B + top-2 x (2 x 4,096 x 2 B + 8 x 1,024 B) = 64 +
  // 2 x 24,576 = 49,216 B.
  CHECK(moe_saved_bytes(moe_model(), s, dm) == 49216.0);
  // The layer: 4,096 tokens x (65,536 + 40,960 + 88,064) = 796,917,760 B.
  CHECK(layer_activation_bytes(llama2_7b(), s, dm, false) == 796917760.0);
}

TEST_CASE("terms: op_saved_bytes stashes wq, wv, w1, w2 and attention",
          "[terms]") {
  const Resolved s = full();
  // Per token: input 8,192 + w2 output 8,192; wq, wv and the attention
  // output 3 x 4,096 x 2 B + logsumexp 32 x 4 B = 24,704; w1 11,008 x 2 B =
  // 22,016: 63,104 B x 4,096 tokens = 258,473,984 B.
  CHECK(op_saved_bytes(llama2_7b(), s, dims(s), false) == 258473984.0);
  // A plain MLP (fc1, GELU, fc2): fc2 is the block's sixth matmul and is
  // recomputed: input 8,192 + 24,704 + fc1 22,016 = 54,912 B x 4,096 =
  // 224,919,552 B. torchao's float8 linears save the same: SAC sees the
  // torch.mm Float8Linear calls on its float8 tensors, not the _scaled_mm
  // inside (torchtitan's December 2024 benchmark: 77.0 GiB, with float8
  // 76.8 GiB).
  Model plain = llama2_7b();
  plain.mlp = MlpKind::plain;
  CHECK(op_saved_bytes(plain, s, dims(s), false) == 224919552.0);
  Resolved f8 = s;
  f8.float8 = true;
  CHECK(op_saved_bytes(plain, f8, dims(f8), false) == 224919552.0);
  CHECK(op_saved_bytes(llama2_7b(), f8, dims(f8), false) == 258473984.0);
  // The block input is the residual stream's: fp32 under
  // prepare_model_for_kbit_training, as full checkpointing keeps it, so a
  // layer per-op checkpointing saves nothing else of (a Mamba block, no
  // attention or MLP matmuls counted) keeps exactly what full keeps:
  // 4,096 tokens x 4 B x 4,096 = 67,108,864 B.
  Model mamba = llama2_7b();
  mamba.num_heads = 0;
  mamba.num_kv_heads = 0;
  mamba.head_dim = 0;
  mamba.intermediate_size = 0;
  mamba.mlp = MlpKind::none;
  Resolved kbit = lora();
  kbit.prepare_kbit = true;
  CHECK(op_saved_bytes(mamba, kbit, dims(kbit), false) == 67108864.0);
  CHECK(op_saved_bytes(mamba, kbit, dims(kbit), false) ==
        checkpointed_input_bytes(kbit, dims(kbit)));
}

TEST_CASE("terms: layer_backward_bytes is the larger working set", "[terms]") {
  const Resolved s = full();
  // MLP: 3 x 11,008 x 2 B = 66,048; attention: 4,096 x (2 + 4 + 2) + 2 x
  // 4,096 x 2 = 49,152; 66,048 x 4,096 tokens = 270,532,608 B.
  CHECK(layer_backward_bytes(llama2_7b(), s, dims(s), false) == 270532608.0);
}

TEST_CASE("terms: layer_sweep totals the stage's layers", "[terms]") {
  const Resolved s = full();
  const LayerSweep sw = layer_sweep(llama2_7b(), s, dims(s), 0, 32);
  CHECK(sw.all == 25501368320.0);  // 32 x 796,917,760
  CHECK(sw.largest == 796917760.0);
  CHECK(sw.op_all == 8271167488.0);  // 32 x 258,473,984
  CHECK(sw.op_gap == 538443776.0);   // 796,917,760 - 258,473,984
  CHECK(sw.backward == 270532608.0);
}

TEST_CASE("terms: a checkpointed layer keeps its input", "[terms]") {
  Resolved s = full();
  CHECK(residual_stream_bytes(s) == 2.0);
  // 4,096 tokens x 2 B x 4,096 = 33,554,432 B.
  CHECK(checkpointed_input_bytes(s, dims(s)) == 33554432.0);
  // tp 2: DeepSpeed's partition keeps half, 16,777,216 B; with sequence
  // parallelism the input is already split.
  s.tp = 2;
  s.gpus = 2;
  CHECK(deepspeed_partitioned_input_bytes(s, dims(s)) == 16777216.0);
  s.sequence_parallel = true;
  CHECK(checkpointed_input_bytes(s, dims(s)) == 16777216.0);
  CHECK(deepspeed_partitioned_input_bytes(s, dims(s)) == 16777216.0);
  Resolved kbit = lora();
  kbit.prepare_kbit = true;
  CHECK(residual_stream_bytes(kbit) == 4.0);  // fp32 embedding
}

TEST_CASE("terms: every_n_checkpointed keeps floor(L / N) inputs only",
          "[terms]") {
  Resolved s = full();
  LayerSweep sw;
  sw.all = 3200;  // 32 layers of 100 B, 10 B input each
  sw.largest = 100;
  // N = 2: 16 layers keep 10 of 100: 3,200 - 16 x 90 = 1,760; the top layer
  // is one of them (recompute 90); offloaded, it and the layer below (not
  // checkpointed) are back: 10 + 100.
  const Checkpointed two = every_n_checkpointed(s, sw, 10, 32);
  CHECK(two.stored == 1760.0);
  CHECK(two.recompute == 90.0);
  CHECK(two.offload_window == 110.0);
  // N = 3: 10 layers checkpointed, 3,200 - 900 = 2,300; the top is not.
  s.checkpoint_every = 3;
  const Checkpointed three = every_n_checkpointed(s, sw, 10, 32);
  CHECK(three.stored == 2300.0);
  CHECK(three.recompute == 0.0);
  CHECK(three.offload_window == 200.0);
}

TEST_CASE("terms: checkpointed_activations by policy", "[terms]") {
  Resolved s = full();
  const Dims dm = dims(s);
  const LayerSweep sw = layer_sweep(llama2_7b(), s, dm, 0, 32);
  const Checkpointed none = checkpointed_activations(s, sw, 0, dm, 32);
  CHECK(none.stored == 25501368320.0);
  CHECK(none.recompute == 0.0);
  CHECK_FALSE(recomputes_layers(s));
  // full: 32 inputs x 33,554,432 = 1,073,741,824 B; one layer recomputed:
  // 796,917,760 - 33,554,432 = 763,363,328 B.
  s.checkpointing = Checkpointing::full;
  const Checkpointed f = checkpointed_activations(s, sw, 0, dm, 32);
  CHECK(f.stored == 1073741824.0);
  CHECK(f.recompute == 763363328.0);
  CHECK(f.per_layer == 33554432.0);
  CHECK(recomputes_layers(s));
  // selective drops 32 layers' scores (1,000 B each here).
  s.checkpointing = Checkpointing::selective;
  CHECK(checkpointed_activations(s, sw, 1000, dm, 32).stored == 25501336320.0);
  CHECK_FALSE(recomputes_layers(s));
  // op: the per-op stash.
  s.checkpointing = Checkpointing::op;
  CHECK(checkpointed_activations(s, sw, 0, dm, 32).stored == 8271167488.0);
  // ds-cpu: the inputs go to the host; backward gathers one input and re-runs
  // the layer: 33,554,432 + 763,363,328 = 796,917,760 B.
  s.checkpointing = Checkpointing::ds_cpu;
  const Checkpointed cpu = checkpointed_activations(s, sw, 0, dm, 32);
  CHECK(cpu.stored == 0.0);
  CHECK(cpu.host == 1073741824.0);
  CHECK(cpu.recompute == 796917760.0);
}

TEST_CASE("terms: final norm and a stage's activations", "[terms]") {
  Resolved s = full();
  // The final RMSNorm keeps (4 + 2) B and the head's bf16 input 2 B per
  // element: 4,096 x 8 x 4,096 = 134,217,728 B.
  CHECK(final_norm_saved_bytes(llama2_7b(), s, dims(s)) == 134217728.0);
  // 25,501,368,320 + 134,217,728 = 25,635,586,048 B.
  const StageActivations a = stage_activations(llama2_7b(), s, layout(s));
  CHECK(a.stored == 25635586048.0);
  CHECK(a.largest_layer == 796917760.0);
  CHECK(a.backward_layer == 270532608.0);
  // Activation offload: all of it on the host, two layers back on the GPU
  // (2 x 796,917,760 = 1,593,835,520 B).
  s.activation_offload = true;
  const StageActivations off = stage_activations(llama2_7b(), s, layout(s));
  CHECK(off.host == 25635586048.0);
  CHECK(off.stored == 1593835520.0);
}

// --- train_loss.cpp

TEST_CASE("terms: loss_bytes per logit by loss implementation", "[terms]") {
  Resolved s = full();
  auto check = [&](Loss loss, bool compile, double fwd, double bwd) {
    s.loss = loss;
    s.compiled_loss = compile;
    const LossBytes lb = loss_bytes(s);
    CHECK(lb.fwd == fwd);
    CHECK(lb.bwd == bwd);
  };
  check(Loss::full, false, 8, 16);  // fp32 logits + log-softmax; + grads
  check(Loss::full, true, 4, 8);
  // chunked: fwd 4 + 2; bwd 4 + (8 + 2) / 8 chunks = 5.25.
  check(Loss::chunked, false, 6, 5.25);
  check(Loss::chunked, true, 2, 2.25);  // 2 + 2 / 8
  check(Loss::upcast, false, 10, 12);   // 2 + 8
  check(Loss::upcast, true, 2, 4);
  check(Loss::upcast_shift, false, 14, 12);  // 2 + 12
  check(Loss::fp32_shift, false, 12, 12);
}

TEST_CASE("terms: logit_bytes over tokens x vocabulary", "[terms]") {
  const Resolved s = full();
  // 4,096 x 32,000 = 131,072,000 logits x 8 B = 1,048,576,000 B in forward,
  // x 16 B = 2,097,152,000 B at the start of backward.
  const LogitBytes l = logit_bytes(llama2_7b(), s, dims(s));
  CHECK(l.fwd == 1048576000.0);
  CHECK(l.bwd == 2097152000.0);
}

// --- buffers.cpp

TEST_CASE("terms: fsdp1_units pads a flat parameter to the world size",
          "[terms]") {
  // 1,000 elements over 3 ranks pad to 1,002: unsharded 2,004 B, gradient
  // 2,000, F.pad's copy 2,004, shard 668; one more all-gather output and the
  // gradient held by record_stream.
  const FsdpOneUnits u = fsdp1_units(1000, 3, 2);
  CHECK(u.unsharded_bytes == 2004.0);
  CHECK(u.grad_bytes == 2000.0);
  CHECK(u.grad_pad_copy_bytes == 2004.0);
  CHECK(u.grad_shard_bytes == 668.0);
  CHECK(u.held_param_bytes == 2004.0);
  CHECK(u.held_grad_bytes == 2000.0);
  CHECK(fsdp1_gradient_buffers(u) == 4672.0);  // 2,000 + 2,004 + 668
  CHECK(fsdp1_units(1000, 4, 2).grad_pad_copy_bytes == 0.0);  // divides
}

TEST_CASE("terms: ZeRO-3 and FSDP gather buffers", "[terms]") {
  Resolved s = full(8);
  s.zero = 3;
  const TrainLayout at = layout(s);
  // One layer: 202,383,360 x 2 B = 404,766,720 B; the embedding and lm_head
  // units 131,072,000 x 2 B = 262,144,000 B each.
  CHECK(gathered_layer_bytes(llama2_7b(), s, at) == 404766720.0);
  CHECK(fsdp_root_unit_bytes(at) == 524288000.0);
  CHECK(vocab_unit_bytes(at) == 262144000.0);
  // max(2 x 404,766,720, 404,766,720 + 262,144,000) + one layer's gradients
  // 404,766,720 = 1,214,300,160 B.
  CHECK(zero3_gather_bytes(s, at, 404766720) == 1214300160.0);
  CHECK(sharding_buffers(llama2_7b(), s, at, 2).bytes == 1214300160.0);
  CHECK(fsdp_offload_copy_bytes(400, 8) == 50.0);
  // A frozen LoRA base gathers layer 0 as stored: 202,375,168 x 2 B +
  // 266,240 / 32 norm params x 2 B = 404,766,976 B.
  Resolved l = lora();
  l.gpus = 8;
  l.zero = 3;
  CHECK(gathered_layer_bytes(llama2_7b(), l, layout(l)) == 404766976.0);
}

TEST_CASE("terms: fsdp1_buffers keep the root unit and held blocks",
          "[terms]") {
  Resolved s = full(8);
  s.zero = 3;
  s.fsdp = true;
  s.fsdp_version = 1;
  const TrainLayout at = layout(s);
  // 202,383,360 divides by 8: unit 404,766,720 B; 2 units + root
  // 524,288,000 = 1,333,821,440; + gradient 404,766,720 + shard 50,595,840
  // = 1,789,184,000 B; held: an all-gather output and a gradient,
  // 809,533,440 B.
  const ShardingBuffers b = fsdp1_buffers(s, at, 404766720);
  CHECK(b.bytes == 1789184000.0);
  CHECK(b.held == 809533440.0);
  CHECK(sharding_buffers(llama2_7b(), s, at, 2).held == 809533440.0);
}

TEST_CASE("terms: ZeRO-1/2 buckets and DDP bucket copies", "[terms]") {
  // 2 x 4,096^2 x 2 B = 67,108,864 B.
  CHECK(zero12_bucket_bytes(llama2_7b(), 2) == 67108864.0);
  Resolved s = full(8);
  s.zero = 2;
  CHECK(sharding_buffers(llama2_7b(), s, layout(s), 2).bytes == 67108864.0);
  // DDP copies every gradient in pure precision; mixed reduces in place.
  s = full(8);
  s.precision = Precision::pure;
  CHECK(ddp_bucket_copy_bytes(s, 8, 1000) == 1000.0);
  CHECK(ddp_bucket_copy_bytes(full(8), 8, 1000) == 0.0);
  CHECK(ddp_bucket_copy_bytes(s, 1, 1000) == 0.0);
}

TEST_CASE("terms: QLoRA dequant, kbit head cast, autocast copies", "[terms]") {
  Resolved q = lora();
  q.mode = Mode::qlora;
  // One 4,096 x 11,008 matrix in bf16: 90,177,536 B.
  CHECK(nf4_dequant_bytes(llama2_7b(), q) == 90177536.0);
  CHECK(nf4_dequant_bytes(llama2_7b(), lora()) == 0.0);
  // The fp32 lm_head cast to bf16: 131,072,000 x 2 B.
  q.prepare_kbit = true;
  CHECK(kbit_head_cast_bytes(q, layout(q)) == 262144000.0);
  CHECK(kbit_head_cast_bytes(lora(), layout(lora())) == 0.0);
  // amp: bf16 copies of every linear weight, (6,476,271,616 layer params -
  // 266,240 norms + 131,072,000 lm_head) x 2 B = 13,214,154,752 B; one
  // layer 202,383,360 x 2 B = 404,766,720 B.
  Resolved amp = full();
  amp.precision = Precision::amp;
  const AutocastCopies c =
      autocast_weight_copies(llama2_7b(), amp, layout(amp));
  CHECK(c.all == 13214154752.0);
  CHECK(c.layer == 404766720.0);
  CHECK(autocast_weight_copies(llama2_7b(), full(), layout(full())).all == 0.0);
}

// --- formula texts, as the report prints them next to each component

TEST_CASE("terms: each training component names its formula", "[terms]") {
  Resolved s = full(8);
  CHECK(weights_formula(s) == "params / (tp x pp) x dtype bytes");
  CHECK(gradients_formula(s) ==
        "trainable params x grad bytes / (dp at ZeRO-2+)");
  CHECK(optimizer_formula(s) ==
        "trainable params x (4 master + 4 m + 4 v) B / ZeRO shard");
  CHECK(logits_formula(s) ==
        "tokens x vocab / tp x (fp32 log-softmax + its gradient + logits "
        "gradient)");
  CHECK(activations_formula(s) ==
        "layers x per-layer saved tensors (Korthikanti 2022 Table 2, "
        "RMSNorm/SwiGLU/GQA terms)");
  CHECK(buffers_formula(s) == "communication buckets / dequantized NF4 weight");
  s.zero = 3;
  s.optimizer_in_bwd = true;
  s.checkpointing = Checkpointing::full;
  s.loss = Loss::chunked;
  CHECK(weights_formula(s) ==
        "params / (tp x pp x dp) x dtype bytes (ZeRO-3 shard)");
  CHECK(gradients_formula(s) ==
        "one parameter's gradient (optimizer step fused into backward)");
  CHECK(logits_formula(s) ==
        "tokens x vocab / tp x (saved chunk logits + one chunk's fp32 loss "
        "gradient) (chunked cross-entropy)");
  CHECK(activations_formula(s) ==
        "layers x tokens x hidden x dtype (checkpointed inputs) + one layer "
        "recomputed (Korthikanti 2022)");
  CHECK(buffers_formula(s) ==
        "gathered layer + prefetched layer + unsharded layer grads "
        "(ZeRO-3/FSDP)");
}
