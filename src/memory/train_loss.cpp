// Logits and the loss on the last pipeline stage: the bytes per logit each
// cross-entropy implementation holds at the end of forward and at the start
// of backward, over tokens x vocabulary (vocab-parallel under TP).

#include "memory/internal.hpp"

namespace oomplan::memory_terms {
namespace {

// torchtune's CEWithChunkedOutputLoss splits the output projection into 8
// chunks (num_output_chunks = 8).
constexpr double k_loss_chunks = 8.0;

}  // namespace

LossBytes loss_bytes(const Resolved& setup) {
  const double d = dtype_bytes(setup.dtype);
  switch (setup.loss) {
    case Loss::chunked:
      if (setup.compiled_loss) {
        // Compiled per-chunk CE saves only its 16-bit input chunk (the
        // chunks stay referenced) and writes one chunk's gradient at a time:
        // inductor fuses the fp32 upcast, softmax and NLL backward into one
        // kernel that writes the gradient in the input's dtype, so no fp32
        // chunk is materialised.
        return {d, d + d / k_loss_chunks};
      }
      // Eager: each chunk's log-softmax keeps its fp32 output; backward
      // works one chunk at a time.
      return {4.0 + d, 4.0 + (8.0 + d) / k_loss_chunks};
    case Loss::full:
      // The model returns fp32 logits (torchtune TransformerDecoder
      // output(h).float()) and the loop keeps its reference through backward
      // (`logits = model(...)`, then `loss.backward()`: torchtune recipes
      // until PR #1046 / #1235, torchtitan until PR #391, custom loops that
      // hold `outputs`); log-softmax saves its fp32 output: forward 8 B, the
      // start of backward 16 B (logits, saved output, its gradient, the
      // logits' gradient). Compiled: log-softmax and NLL fused, the fp32
      // logits kept (4 B) and their gradient written in one kernel (4 B).
      return setup.compiled_loss ? LossBytes{4.0, 8.0} : LossBytes{8.0, 16.0};
    case Loss::upcast:
      // F.cross_entropy(logits.float()) on 16-bit logits that the loop frees
      // before backward (torchtitan components/loss.py cross_entropy_loss and
      // train.py `del pred`; transformers >= 4.49 loss/loss_utils.py
      // ForCausalLMLoss pads the labels instead of slicing the logits, and
      // Trainer.compute_loss drops `outputs`). Forward: the 16-bit logits,
      // their fp32 copy and log-softmax's fp32 output (d + 8 B); backward:
      // the saved output, NLL's gradient and log-softmax's (12 B). Compiled:
      // inductor keeps the 16-bit input and writes its gradient (d + d).
      return setup.compiled_loss ? LossBytes{d, 2.0 * d}
                                 : LossBytes{d + 8.0, 12.0};
    case Loss::upcast_shift:
      // transformers 4.46-4.48 ForCausalLMLoss: logits.float(), then
      // shift_logits = logits[..., :-1, :].contiguous(), a second fp32 copy,
      // while the model still holds its 16-bit logits (d + 12 B).
      return setup.compiled_loss ? LossBytes{d, 2.0 * d}
                                 : LossBytes{d + 12.0, 12.0};
    case Loss::fp32_shift:
      // transformers <= 4.45 LlamaForCausalLM.forward: logits =
      // lm_head(...).float() (the 16-bit product freed at once), then the
      // shifted fp32 copy and log-softmax's output (12 B); Trainer frees
      // the fp32 logits before backward (12 B). Compiled: the fp32 logits
      // are a model output, materialised as in `full`.
      return setup.compiled_loss ? LossBytes{4.0, 8.0} : LossBytes{12.0, 12.0};
  }
  return {8.0, 16.0};
}

LogitBytes logit_bytes(const Model& model, const Resolved& setup,
                       const Dims& dm) {
  // Chunked CE (torchtune CEWithChunkedOutputLoss) runs the output
  // projection and the loss in 8 chunks; loss_bytes() says per logit.
  const double elems =
      dm.tokens * as_double(model.vocab_size) / dm.t;  // vocab-parallel
  const LossBytes lb = loss_bytes(setup);
  return {elems * lb.fwd, elems * lb.bwd};
}

double reference_logit_bytes(const Model& model, const Resolved& setup,
                             const Dims& dm) {
  if (!setup.runs_reference_forward()) {
    return 0;
  }
  // TRL computes the reference log-probs right after the policy's
  // concatenated_forward, whose logits autograd still holds
  // (dpo_trainer.py get_batch_loss_metrics -> compute_ref_log_probs under
  // no_grad): the reference's 16-bit logits over the same rows join them;
  // selective_log_softmax (trl/trainer/utils.py) takes 16-bit log-softmax
  // row by row, so no full fp32 copy.
  return dm.tokens * as_double(model.vocab_size) / dm.t *
         dtype_bytes(setup.dtype);
}

std::string_view logits_formula(const Resolved& setup) {
  switch (setup.loss) {
    case Loss::chunked:
      return "tokens x vocab / tp x (saved chunk logits + one chunk's fp32 "
             "loss gradient) (chunked cross-entropy)";
    case Loss::upcast:
      return "tokens x vocab / tp x (16-bit logits + fp32 copy + "
             "log-softmax; backward 12 B) (loss upcasts, output freed)";
    case Loss::upcast_shift:
      return "tokens x vocab / tp x (16-bit logits + fp32 copy + shifted "
             "fp32 copy + log-softmax) (transformers 4.46-4.48)";
    case Loss::fp32_shift:
      return "tokens x vocab / tp x (fp32 logits + shifted fp32 copy + "
             "log-softmax) (transformers <= 4.45)";
    case Loss::full:
      break;
  }
  return "tokens x vocab / tp x (fp32 log-softmax + its gradient + logits "
         "gradient)";
}

}  // namespace oomplan::memory_terms
