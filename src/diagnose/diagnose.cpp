#include "oomplan/diagnose/diagnose.hpp"

// `oomplan diagnose`: the names of DESIGN §2's formats and causes, and the
// one-shot diagnosis. The scanner is scanner.cpp; the grammars, one file per
// log format family, are listed in grammars.hpp; the cause rules and fixes
// are explain.cpp; the comparison with a plan is plan.cpp.

namespace oomplan {

std::string_view oom_format_name(OomFormat format) {
  switch (format) {
    case OomFormat::pytorch2:
      return "pytorch2";
    case OomFormat::pytorch1:
      return "pytorch1";
    case OomFormat::vllm:
      return "vllm";
    case OomFormat::cuda_runtime:
      return "cuda_runtime";
    case OomFormat::cublas:
      return "cublas";
    case OomFormat::nccl:
      return "nccl";
    case OomFormat::xla:
      return "xla";
    case OomFormat::other:
      return "other";
  }
  return "other";
}

std::string_view oom_cause_name(OomCause cause) {
  switch (cause) {
    case OomCause::vllm_startup_free_memory:
      return "vllm_startup_free_memory";
    case OomCause::vllm_kv_cache:
      return "vllm_kv_cache";
    case OomCause::context_creation:
      return "context_creation";
    case OomCause::fragmentation:
      return "fragmentation";
    case OomCause::unknown:
      return "unknown";
    case OomCause::large_allocation:
      return "large_allocation";
    case OomCause::other_processes:
      return "other_processes";
    case OomCause::shortfall:
      return "shortfall";
  }
  return "shortfall";
}

Diagnosis diagnose(std::string_view log) {
  LogScanner scanner;
  scanner.feed(log);
  return scanner.finish();
}

}  // namespace oomplan
