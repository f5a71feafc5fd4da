"""Shared fixtures: the CLI binary, the model, report strings."""

import os
import shutil
import signal

import pytest

# A runner started in the background of a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler: the Ctrl-C tests, which
# send SIGINT to this process, need the one an interactive run has.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REF = "<think>Heart size is normal. The lungs are clear. No pleural effusion.</think><answer>No acute cardiopulmonary abnormality.</answer>"
REF_PLAIN = "FINDINGS: Heart size is normal. The lungs are clear. No pleural effusion.\n\nIMPRESSION: No acute cardiopulmonary abnormality."
GOOD = "<think>The heart is normal in size. Lungs are clear.</think><answer>No acute disease.</answer>"
OTHER = "<think>There is a large right pleural effusion. Cardiomegaly.</think><answer>Right effusion and cardiomegaly.</answer>"
MALFORMED = [
    "",
    "Heart size is normal.",
    "<think>Heart size is normal.</think>",
    "<think>Heart size is normal.</think><answer></answer>",
    "<answer>No acute disease.</answer><think>Heart normal.</think>",
    "junk <think>Heart normal.</think><answer>Normal.</answer>",
    "<think>A.</think><think>B.</think><answer>C.</answer>",
]


@pytest.fixture(scope="session")
def sdr_bin():
    path = os.environ.get("SDR_BIN") or shutil.which("sdr")
    if not path or not os.path.exists(path):
        pytest.skip("the sdr CLI is not built (scripts/test-python.sh sets SDR_BIN)")
    return path


@pytest.fixture(scope="session")
def reward():
    import sdr_rewards

    return sdr_rewards.SDRReward()


@pytest.fixture(scope="session")
def encoder():
    import sdr_rewards

    return sdr_rewards.Encoder()
