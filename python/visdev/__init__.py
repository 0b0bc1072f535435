"""visdev: choose and lease NVIDIA GPUs from inside a script, before `import torch`.

    import visdev
    lease = visdev.acquire(n=2, min_free="20G", or_cpu=True)
    import torch

The same engine, leases and line as the `visdev` command: everything is in the
C extension over libvisdev; this file only names what it exports.
"""
from ._visdev import (
    ArgumentError,
    Error,
    Lease,
    NoFitError,
    TooLateError,
    __version__,
    acquire,
    devices,
    leases,
    resolve,
    use_demo,
    use_fixture,
)

__all__ = ["ArgumentError", "Error", "Lease", "NoFitError", "TooLateError", "acquire", "devices", "leases",
           "resolve", "use_demo", "use_fixture"]
