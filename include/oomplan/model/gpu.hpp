#pragma once

// Gpu: one accelerator model as the catalog describes it. Capacities are stored
// in bytes exactly as the CUDA runtime reports them
// (torch.cuda.get_device_properties().total_memory), the figure that
// allocations and vLLM's gpu_memory_utilization see, and as nvidia-smi shows
// them.

#include "oomplan/util/units.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace oomplan {

struct Gpu {
  std::string
      name;  // canonical short name, e.g. "H100-80", "A100-80", "RTX4090"
  std::string full_name;             // e.g. "NVIDIA H100 80GB HBM3 (SXM5)"
  std::vector<std::string> aliases;  // e.g. "H100", "h100-80gb-sxm"
  std::string vendor;                // "NVIDIA", "AMD", "Intel"
  std::string arch;                  // e.g. "Hopper"
  int compute_capability = 0;  // major * 10 + minor, e.g. 90; 0 for non-NVIDIA
  Bytes capacity_bytes = 0;    // CUDA-reported total (what PyTorch/vLLM see)
  Bytes smi_bytes = 0;         // nvidia-smi total (MiB x 2^20)
  std::string
      capacity_note;  // how capacity_bytes was obtained when not measured
  double bandwidth_gb_s = 0;  // HBM/GDDR bandwidth, 10^9 B/s
  double bf16_tflops = 0;     // dense tensor-core peak
  double fp8_tflops = 0;      // 0 when the card has no FP8 tensor cores
  double nvlink_gb_s =
      0;  // bidirectional per GPU; 0 when the cards talk over PCIe only
  double pcie_gb_s = 0;      // host link, one direction, 10^9 B/s
  bool common = false;       // listed by `oomplan MODEL` without --gpus
  std::string interconnect;  // the links in words, e.g. "NVLink 4: 900 GB/s"
  std::string note;          // caveats, e.g. "no BF16: FP16 figure"

  bool operator==(const Gpu&) const = default;
};

// A cloud instance type: `count` GPUs of catalog GPU `gpu`, with the host
// RAM and on-demand price its provider lists (0 when no public list gives
// them; models/README.md cites each figure's source).
struct Instance {
  std::string name;  // e.g. "p4de.24xlarge"
  std::string gpu;   // Gpu::name
  int count = 0;
  Bytes host_ram_bytes = 0;       // CPU RAM of one instance (JSON host_ram_gib)
  double price_usd_per_hour = 0;  // on-demand, whole instance, USD per hour

  bool operator==(const Instance&) const = default;
};

}  // namespace oomplan
