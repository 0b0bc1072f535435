"""The guide's setup_gpu(required_memory), done with visdev.

The guide's version reads nvidia-smi, picks the GPUs with enough free memory,
sets CUDA_VISIBLE_DEVICES by hand and falls back to the CPU; two such scripts
started together both take the same "free" GPU. Here visdev chooses, leases
the GPUs (no other visdev job can take them while this process lives) and
writes the variable, before torch starts CUDA.

    python examples/train.py 20G        # one GPU with 20 GiB free, or the CPU
"""
import sys

import visdev


def setup_gpu(required_memory, n=1):
    """GPUs with required_memory free each (a size: "20G"), leased for this process;
    the CPU when none has it. Returns the torch device to use and the lease."""
    lease = visdev.acquire(n=n, min_free=required_memory, or_cpu=True)
    if not lease.devices:
        print(f"no GPU has {required_memory} free: training on the CPU")
        return "cpu", lease
    names = ", ".join(f"GPU {d['index']} ({d['name']})" for d in lease.devices)
    print(f"training on {names}: CUDA_VISIBLE_DEVICES={lease.cuda_visible_devices}")
    # the process sees only the GPUs leased, renumbered from 0: cuda:0 is the first
    return "cuda:0", lease


if __name__ == "__main__":
    device, lease = setup_gpu(sys.argv[1] if len(sys.argv) > 1 else "8G")
    import torch  # only now: CUDA reads CUDA_VISIBLE_DEVICES when it starts

    model = torch.nn.Linear(10, 1).to(device)
    print("model on", device)
