"""Exceptions raised by the zerobubble package."""


class ZeroBubbleError(Exception):
    """Base class of every error the package raises."""


class ToolNotFoundError(ZeroBubbleError):
    """A ZeroBubble tool (zb-opt, zb-run, zb-sched) could not be located."""


class CompilerError(ZeroBubbleError):
    """A ZeroBubble tool failed.

    ``str(error)`` is the tool's diagnostic text; the attributes keep the
    details: ``command`` (the argument list), ``returncode``,
    ``diagnostics`` (the tool's standard error) and ``output`` (its
    standard output).
    """

    def __init__(self, command, returncode, diagnostics, output=""):
        self.command = list(command)
        self.returncode = returncode
        self.diagnostics = diagnostics
        self.output = output
        tool = self.command[0].rsplit("/", 1)[-1] if self.command else "tool"
        text = diagnostics.strip() or output.strip()
        message = f"{tool} failed (exit code {returncode})"
        super().__init__(f"{message}:\n{text}" if text else message)


class FrontendError(ZeroBubbleError):
    """A PyTorch program could not be turned into the compiler's input IR."""


def describe_module(module_path, module_type=""):
    """``module 'h.0.attn' (GPT2Attention)``, or ``the root module
    (Model)``."""
    where = f"module '{module_path}'" if module_path else "the root module"
    return where + (f" ({module_type})" if module_type else "")


class UnsupportedOpError(FrontendError):
    """An ATen op (or a form of one) that the PyTorch frontend cannot emit.

    ``op`` is the ATen overload (``aten.cumsum.default``), ``module_path``
    the dotted path of the ``nn.Module`` that called it (``""`` for the root
    module) and ``module_type`` that module's class name.
    """

    def __init__(self, op, module_path, module_type="", detail=""):
        self.op = op
        self.module_path = module_path
        self.module_type = module_type
        self.detail = detail
        message = f"unsupported aten op '{op}' in " + \
            describe_module(module_path, module_type)
        if detail:
            message += f": {detail}"
        super().__init__(message)


class FrontendWarning(UserWarning):
    """A PyTorch program was translated, but what it trains may differ from
    PyTorch's own training of the module (the message says how)."""
