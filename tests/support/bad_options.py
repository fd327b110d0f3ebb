"""Bad reader options, each with what its error must name (checked with and without Spark)."""

from __future__ import annotations

from typing import NamedTuple

SECRET = "s3cr3t-do-not-show"


class BadOption(NamedTuple):
    options: dict[str, str | None]  # None removes the option; TOPIC is the test's topic
    named: str  # what the error message must contain


#: Every bad reader option, by a name of its own (the test ids).
CASES: dict[str, BadOption] = {
    "no-bootstrap-servers": BadOption({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers"),
    "no-subscription": BadOption({"subscribe": None}, "subscribe"),
    "subscribe-and-assign": BadOption({"assign": '{"x":[0]}'}, "Only one of the following options"),
    "empty-subscribePattern": BadOption({"subscribePattern": ""}, "subscribePattern"),
    "startingOffsets-bogus": BadOption({"startingOffsets": "bogus"}, "startingOffsets"),
    "startingOffsets-unknown-partition": BadOption(
        {"startingOffsets": '{"TOPIC":{"0":0,"7":0}}'}, "startingOffsets"
    ),
    "endingOffsets-in-a-stream": BadOption({"endingOffsets": "latest"}, "endingOffsets"),
    "maxOffsetsPerTrigger-zero": BadOption({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    "minOffsetsPerTrigger-above-max": BadOption(
        {"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"
    ),
    "maxTriggerDelay-not-a-duration": BadOption({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    "minPartitions-negative": BadOption({"minPartitions": "-1"}, "minPartitions"),
    "failOnDataLoss-not-a-boolean": BadOption({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    "includeHeaders-not-a-boolean": BadOption({"includeHeaders": "yes"}, "includeHeaders"),
    "isolation-level-unknown": BadOption(
        {"kafka.isolation.level": "serializable"}, "kafka.isolation.level"
    ),
    "auto.offset.reset": BadOption({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
    "enable.auto.commit": BadOption({"kafka.enable.auto.commit": "true"}, "enable.auto.commit"),
    "key.deserializer": BadOption({"kafka.key.deserializer": "x.Y"}, "key.deserializer"),
    "interceptor.classes": BadOption({"kafka.interceptor.classes": "x.Y"}, "interceptor.classes"),
    "unknown-kafka-property": BadOption({"kafka.no.such.property": "1"}, "no.such.property"),
    # OAUTHBEARER client credentials without kafka.sasl.mechanism=OAUTHBEARER (nor a
    # clientId or token endpoint): refused naming the option, never showing the secret.
    "sasl.jaas.config-with-a-secret": BadOption(
        {
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            f'OAuthBearerLoginModule required clientSecret="{SECRET}";'
        },
        "kafka.sasl.jaas.config",
    ),
    "oauthbearer-without-a-token-source": BadOption(
        {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "OAUTHBEARER"},
        "kafka.sasl.oauthbearer.token.provider",
    ),
    "lsoStallWarnMs-negative": BadOption({"lsoStallWarnMs": "-5"}, "lsoStallWarnMs"),
}


#: One case per place an option can fail: schema(), option parsing, librdkafka's own
#: configuration check, and offset resolution at the first trigger. Every case of CASES is
#: checked without Spark in test_options.py.
THROUGH_SPARK = [
    "no-bootstrap-servers",
    "startingOffsets-unknown-partition",
    "includeHeaders-not-a-boolean",
    "enable.auto.commit",
    "unknown-kafka-property",
    "sasl.jaas.config-with-a-secret",
]
