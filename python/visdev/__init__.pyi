from types import SimpleNamespace
from typing import Any, Iterable, Literal, Optional, Union

__version__: str

class Error(Exception): ...

class NoFitError(Error):
    reasons: list[dict[str, Any]]
    """One per device that does not fit (and one for the request as a whole, index None):
    index, uuid, name, pci_bus_id, reason (a stable code: 'busy', 'leased', 'memory', ...)
    and why (the sentence `visdev pick` prints)."""

class TooLateError(Error): ...

class ArgumentError(Error, ValueError): ...

class Lease:
    devices: list[dict[str, Any]]
    env: dict[str, str]
    cuda_visible_devices: str
    released: bool
    def release(self) -> None: ...
    def __enter__(self) -> "Lease": ...
    def __exit__(self, *exc: object) -> None: ...

def acquire(
    n: int = 1,
    *,
    min_free: Optional[str] = None,
    max_util: Optional[int] = None,
    model: Optional[str] = None,
    exclude: Optional[Iterable[int]] = None,
    policy: Optional[Literal["most-free", "least-used", "pack"]] = None,
    mem: Optional[str] = None,
    wait: Union[None, bool, float] = None,
    or_cpu: bool = False,
) -> Lease: ...
def devices() -> list[SimpleNamespace]: ...
def resolve(value: Optional[str] = None, order: Optional[Literal["pci", "fastest"]] = None) -> SimpleNamespace: ...
def leases() -> list[SimpleNamespace]: ...
def use_demo() -> None: ...
def use_fixture(path: str) -> None: ...
