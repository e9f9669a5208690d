"""Typed errors. Every failure a client can see maps to one of these and then to an ``error`` event."""


class PhasegraphError(RuntimeError):
    """Root of every error phasegraph raises on purpose.

    A ``RuntimeError`` because langgraph-api (``langgraph dev``, Studio, langgraph-sdk clients)
    shows the message of built-in error types such as ``RuntimeError`` and replaces every other
    message with "An internal error occurred"; our messages are written for the user.
    """

    kind = "internal"


class ConfigurationError(PhasegraphError):
    """A run was configured with something that cannot work (unknown protocol, bad model spec, ...)."""

    kind = "configuration"


class ScriptError(PhasegraphError):
    """A scripted model's script is unreadable, malformed, or has no turn left."""

    kind = "script"


class InvalidModelOutput(PhasegraphError):
    """The model produced something the protocol cannot interpret."""

    kind = "invalid_model_output"


class NotFoundError(PhasegraphError):
    """A request, thread or checkpoint does not exist (or is not visible to the caller)."""

    kind = "not_found"


class ConflictError(PhasegraphError):
    """The request is in a state that does not allow this (cancelled, already running, ...)."""

    kind = "conflict"


class BudgetExhausted(PhasegraphError):
    """A hard budget ran out where the protocol has no graceful way to continue."""

    kind = "budget_exhausted"


class InvalidInputError(PhasegraphError):
    """A request is well-formed but names something impossible (an event id past the log, ...)."""

    kind = "invalid_input"


class TooLargeError(PhasegraphError):
    """A message or body is larger than this server accepts."""

    kind = "too_large"


class ProviderError(PhasegraphError):
    """A model provider failed (HTTP error, timeout, connection) after the client's retries.

    The message names the provider, the model, the status and how many attempts were made, and
    never carries a configured secret (it is built redacted).
    """

    kind = "provider"

    def __init__(self, message: str, *, provider: str, model: str, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.provider, self.model, self.status, self.attempts = provider, model, status, attempts

    def __reduce__(self) -> tuple[object, ...]:
        # Checkpointers serialize a failed task's error; keep the keyword fields when they do.
        return (_rebuild_provider_error, (str(self), self.provider, self.model, self.status, self.attempts))


def _rebuild_provider_error(
    message: str, provider: str, model: str, status: int | None, attempts: int
) -> ProviderError:
    return ProviderError(message, provider=provider, model=model, status=status, attempts=attempts)


def describe(exc: Exception) -> tuple[str, str]:
    """The ``kind`` and ``message`` of the ``error`` event a failure becomes."""
    if isinstance(exc, PhasegraphError):
        return exc.kind, str(exc)
    # Its text may name the server's files or internals: clients get the kind, the log the rest.
    return "internal", f"an unexpected {type(exc).__name__} ended the run; the server log has the details"
