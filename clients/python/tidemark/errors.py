"""TidemarkError: a failed call with tidemark's google.rpc.ErrorInfo reason,
metadata and BadRequest field violations decoded."""

from __future__ import annotations

from typing import Dict, List, Tuple

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


class TidemarkError(Exception):
    """A failed tidemark call.

    `code` is the grpc.StatusCode, `reason` the ErrorInfo reason (e.g.
    "LEASE_HELD", "LEASE_NOT_HELD", "POSITION_EXPIRED"; empty when the server
    sent none), `metadata` its details (e.g. holder, current_epoch), and
    `field_violations` the (field, description) pairs of invalid input.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        metadata: Dict[str, str] | None = None,
        field_violations: List[Tuple[str, str]] | None = None,
    ):
        super().__init__(f"{code.name} {reason}: {message}" if reason else f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.field_violations = list(field_violations or [])

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "TidemarkError":
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        message = error.details() if hasattr(error, "details") else str(error)
        reason, metadata, violations = "", {}, []
        try:
            status = rpc_status.from_call(error)
        except Exception:  # a transport error carries no status details
            status = None
        if status is not None:
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    reason, metadata = info.reason, dict(info.metadata)
                elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                    bad = error_details_pb2.BadRequest()
                    detail.Unpack(bad)
                    violations = [(v.field, v.description) for v in bad.field_violations]
        return cls(code, message or "", reason, metadata, violations)


def is_retryable(error: TidemarkError) -> bool:
    """Whether a failed call may be retried: only transient failures where the
    call did not happen or is safe to repeat. Never a refusal such as
    FAILED_PRECONDITION (a fenced lease must stop, not retry)."""
    if error.code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ):
        return True
    return error.code == grpc.StatusCode.ABORTED and error.reason == "CONTENTION"
