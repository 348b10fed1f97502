"""The MSK IAM token provider with AWS's signer stood in for (no AWS account in tests): the
config string's options reach the right signer call, and the expiry comes back in seconds."""

from __future__ import annotations

import sys
import types

import pytest

from spark_kafka_sink.client.auth.jaas import credentials_from_config
from spark_kafka_sink.client.auth.msk_iam import msk_iam_token
from spark_kafka_sink.client.auth.oauth import import_provider
from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import AuthenticationError

EXPIRY_MS = 1_700_000_900_000


@pytest.fixture
def signer(monkeypatch):
    calls = []
    provider = types.SimpleNamespace(
        generate_auth_token=lambda region: calls.append(("default", region)) or ("dG9rZW4", EXPIRY_MS),
        generate_auth_token_from_profile=lambda region, profile: calls.append(("profile", region, profile))
        or ("dG9rZW4", EXPIRY_MS),
        generate_auth_token_from_role_arn=lambda region, arn, sts_session_name="default": calls.append(
            ("role", region, arn, sts_session_name)) or ("dG9rZW4", EXPIRY_MS))
    module = types.ModuleType("aws_msk_iam_sasl_signer")
    module.MSKAuthTokenProvider = provider
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", module)
    return calls


def test_each_credential_source_calls_its_signer(signer):
    assert msk_iam_token("region=us-east-1") == ("dG9rZW4", EXPIRY_MS / 1000)
    msk_iam_token("region=eu-west-1 profile=etl")
    msk_iam_token("region=eu-west-1 role_arn=arn:aws:iam::123456789012:role/writer session_name=spark")
    assert signer == [("default", "us-east-1"), ("profile", "eu-west-1", "etl"),
                      ("role", "eu-west-1", "arn:aws:iam::123456789012:role/writer", "spark")]


@pytest.mark.parametrize("config, message", [
    (None, "needs region="), ("profile=x", "needs region="), ("region=a colour=red", "got an entry 'colour'"),
    ("region=a profile=p role_arn=r", "not both"), ("region=a session_name=s", "goes with role_arn"),
])
def test_a_bad_config_string_is_named(signer, config, message):
    with pytest.raises(ValueError, match=message):
        msk_iam_token(config)


def test_through_the_producer_config_and_a_missing_signer_is_explained(signer, monkeypatch):
    config = ProducerConfig({"bootstrap.servers": "b-1.example:9098", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "OAUTHBEARER",
                             "sasl.oauthbearer.token.provider": "spark_kafka_sink.client.auth.msk_iam:msk_iam_token",
                             "sasl.oauthbearer.config": "region=us-east-1"})
    cache = credentials_from_config(config).token_cache
    token = cache.source.fetch(0)
    assert (token.value, token.expires_at_ms) == ("dG9rZW4", EXPIRY_MS)
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)   # not installed
    with pytest.raises(AuthenticationError, match=r"pip install 'spark-kafka-sink\[msk\]'"):
        cache.source.fetch(0)


@pytest.mark.parametrize("path", ["spark_kafka_sink.client.auth.msk_iam:msk_iam_token",
                                  "spark_kafka_sink.client.msk_iam:msk_iam_token"])
def test_the_old_provider_path_still_names_the_same_function(signer, path):
    """Configurations written before the move name ``client.msk_iam``: the loader the producer uses
    for ``sasl.oauthbearer.token.provider`` still finds the one function, and it makes tokens."""
    assert import_provider(path) is msk_iam_token
    config = ProducerConfig({"bootstrap.servers": "b-1.example:9098", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.provider": path,
                             "sasl.oauthbearer.config": "region=us-east-1"})
    token = credentials_from_config(config).token_cache.source.fetch(0)
    assert (token.value, token.expires_at_ms) == ("dG9rZW4", EXPIRY_MS)
