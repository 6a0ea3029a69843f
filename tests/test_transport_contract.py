"""Our model transports pass the contract a third party's provider runs
(``benchledger.testing.ModelTransportContract``): the fake, the replay log, and the
Anthropic and OpenAI-compatible transports against the loopback fake servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchledger import protocols
from benchledger.harness.agents.fake import scripted_decision
from benchledger.harness.models import FakeTransport, ModelResponse, ModelTransport
from benchledger.harness.models.anthropic import AnthropicTransport
from benchledger.harness.models.openai import OpenAICompatTransport
from benchledger.harness.models.request import request_hash, request_json
from benchledger.harness.models.response import response_json
from benchledger.ledger.events import ModelCallBody
from benchledger.replay.log_transport import LogTransport
from benchledger.testing import ModelTransportContract
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.brain import ScriptedBrain
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.server import FakeProvider
from tests.test_model_transports import KEY, Sleeps


class TestFakeTransport(ModelTransportContract):
    deterministic = True

    def create_transport(self) -> ModelTransport:
        return FakeTransport(scripted_decision, delay_s=0)


class TestLogTransport(ModelTransportContract):
    deterministic = True

    def create_transport(self) -> ModelTransport:
        req = self.request()
        answer = ModelResponse(
            text="FINAL ANSWER: 42", usage={"input_tokens": 9, "output_tokens": 4}
        )
        recorded = ModelCallBody(
            episode="recall",
            request_hash=request_hash(req),
            request=request_json(req),
            response=response_json(answer),
        )
        return LogTransport([recorded])


class _LoopbackProvider(ModelTransportContract):
    """A provider transport against its fake server, which answers as the scripted agent."""

    fake: type[FakeProvider]
    server: FakeProvider

    @pytest.fixture(autouse=True)
    def _served(self) -> Iterator[None]:
        brain = ScriptedBrain(protocols.load(protocols.LIFECYCLE_DIR).protocols)
        self.server = self.fake(brain, key=KEY).start()
        yield
        self.server.stop()

    def transport(self, url: str, key: str) -> ModelTransport:
        raise NotImplementedError

    def create_transport(self) -> ModelTransport:
        return self.transport(self.server.url, KEY)

    def create_failing_transport(self, retryable: bool) -> ModelTransport | None:
        if not retryable:
            return self.transport(self.server.url, "sk-not-the-key")
        down = self.fake().start()
        url = down.url
        down.stop()  # nothing listens on the port now
        return self.transport(url, KEY)


class TestAnthropicTransport(_LoopbackProvider):
    fake = FakeAnthropic

    def transport(self, url: str, key: str) -> ModelTransport:
        return AnthropicTransport(self.model, api_key=key, base_url=url, max_retries=1,
                                  sleep=Sleeps())  # fmt: skip


class TestOpenAICompatTransport(_LoopbackProvider):
    fake = FakeOpenAI

    def transport(self, url: str, key: str) -> ModelTransport:
        return OpenAICompatTransport(self.model, base_url=f"{url}/v1", api_key=key, max_retries=1,
                                     sleep=Sleeps())  # fmt: skip
