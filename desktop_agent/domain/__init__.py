"""Plain value objects and enums; imports nothing else of ours."""

from desktop_agent.domain.enums import (
    ApprovalPolicy,
    ApprovalState,
    CommandKind,
    EffectClass,
    Resolution,
    RunStatus,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.domain.models import (
    JSON,
    AgentSpec,
    Approval,
    Budget,
    Command,
    Run,
    Step,
    Usage,
    WorkerInfo,
    idempotency_key,
)

__all__ = [
    "JSON",
    "AgentSpec",
    "Approval",
    "ApprovalPolicy",
    "ApprovalState",
    "Budget",
    "Command",
    "CommandKind",
    "EffectClass",
    "Resolution",
    "Run",
    "RunStatus",
    "Step",
    "StepKind",
    "StepStatus",
    "Usage",
    "WaitReason",
    "WorkerInfo",
    "idempotency_key",
]
