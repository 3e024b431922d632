"""tensorflow for foldcheck.keras, imported once (tensorflow is imported when this module is)."""
import os
import sys
import tempfile


def _tensorflow():
    """tensorflow, with what it writes to stderr while it loads held back (absl's notes on
    oneDNN and CUDA stubs, written before any log level applies); replayed if the import
    fails. Already imported: taken as it is."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow  # noqa: PLC0415
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return tensorflow


tf = _tensorflow()
