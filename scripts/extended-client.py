"""AWS's Python extended client on the other side of sqs-engine's large-payload tests.

  extended-client.py send QUEUE_URL BUCKET FILE      sends FILE's text, through S3 when large
  extended-client.py receive QUEUE_URL BUCKET FILE   receives one message, writes its body to
                                                     FILE, and deletes it

The endpoint, region and credentials come from the environment (AWS_ENDPOINT_URL and the rest).
"""

import sys

import boto3
import sqs_extended_client  # noqa: F401 (gives boto3's SQS client its large-payload support)


def main() -> None:
    command, queue_url, bucket, path = sys.argv[1:5]
    sqs = boto3.client("sqs")
    sqs.large_payload_support = bucket
    if command == "send":
        with open(path, encoding="utf-8") as file:
            sqs.send_message(QueueUrl=queue_url, MessageBody=file.read())
        return
    if command != "receive":
        sys.exit(f"unknown command {command!r}")
    for _ in range(20):
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MessageAttributeNames=["All"],
            MaxNumberOfMessages=1,
            WaitTimeSeconds=1,
        ).get("Messages", [])
        if messages:
            message = messages[0]
            with open(path, "w", encoding="utf-8") as file:
                file.write(message["Body"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            return
    sys.exit("no message within 20 s")


if __name__ == "__main__":
    main()
