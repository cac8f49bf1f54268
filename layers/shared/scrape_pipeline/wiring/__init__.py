"""Each Lambda's logic built from the environment on real AWS clients (boto3 honours
``AWS_ENDPOINT_URL``), one module each, so a function imports only what it runs."""
