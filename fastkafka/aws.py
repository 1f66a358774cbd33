"""Amazon MSK IAM: :class:`MSKIAMTokenProvider`, the OAUTHBEARER token MSK's IAM listeners accept,
from the standard AWS credential chain, with the standard library only.

::

    from fastkafka import Producer
    from fastkafka.aws import MSKIAMTokenProvider

    Producer({"bootstrap.servers": "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098",
              "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
              "sasl_oauth_token_provider": MSKIAMTokenProvider("eu-west-1")})

The token is an AWS Signature Version 4 presigned URL for ``kafka-cluster:Connect`` on
``https://kafka.<region>.amazonaws.com/``, base64url without padding, as AWS's signer libraries
make it; the credentials come from the keys given, the environment, web identity, the shared
files' profiles, the container endpoint or the instance role (IMDSv2), in that order
(:class:`CredentialChain`). Failures are :class:`~fastkafka.errors.AwsCredentialsError` naming the
source, never a secret. The code is in :mod:`fastkafka._net.aws_iam`; docs/security.md, "Amazon
MSK IAM", has the details and the Java library's settings that map to it.
"""
from fastkafka._net.aws_iam import (AwsCredentials, CredentialChain, MSKIAMTokenProvider,
                                    msk_region_from_host)

__all__ = ["MSKIAMTokenProvider", "AwsCredentials", "CredentialChain", "msk_region_from_host"]
