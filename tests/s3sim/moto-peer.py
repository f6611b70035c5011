#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""moto's S3 (an emulator written by others) as a test peer, with signatures checked.

Starts moto's server from its source tree ($MOTO_PATH, default /opt/moto: getmoto/moto 5.1.22)
on a free port; its first three calls are free and make an IAM user allowed s3:*, whose key
signs every later call (moto then checks each signature). Makes the bucket volplug-snaps,
checks that a wrong secret is refused, and prints one line on stdout:

    PORT <port> KEY <key id> SECRET <secret>
    SKIP <why>                                  (moto or what it needs is missing)

then waits until its stdin closes and stops moto.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

MOTO_PATH = os.environ.get("MOTO_PATH", "/opt/moto")
BUCKET = "volplug-snaps"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if not os.path.isfile(os.path.join(MOTO_PATH, "moto", "server.py")):
        print("SKIP moto is not installed: want its source tree (getmoto/moto 5.1.22) in %s "
              "(set MOTO_PATH)" % MOTO_PATH, flush=True)
        return 0
    try:
        import botocore.config
        import botocore.session
    except ImportError:
        print("SKIP python3-botocore is not installed", flush=True)
        return 0
    tmp = tempfile.mkdtemp(prefix="moto-peer-")
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "PYTHONPATH": MOTO_PATH,
           "INITIAL_NO_AUTH_ACTION_COUNT": "3"}
    log = open(os.path.join(tmp, "moto.log"), "ab")
    proc = subprocess.Popen(["/usr/bin/python3", "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=env, stdout=log, stderr=log)
    try:
        endpoint = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                print("SKIP moto did not start (exit %d)" % proc.returncode, flush=True)
                return 0
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    print("SKIP moto did not listen within 20 s", flush=True)
                    return 0
                time.sleep(0.05)
        session = botocore.session.get_session()
        iam = session.create_client("iam", region_name="us-east-1", endpoint_url=endpoint,
                                    aws_access_key_id="AKIAMOTOBOOTSTRAP000",
                                    aws_secret_access_key="bootstrap")
        iam.create_user(UserName="volplug")
        key = iam.create_access_key(UserName="volplug")["AccessKey"]
        iam.put_user_policy(UserName="volplug", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        cfg = botocore.config.Config(s3={"addressing_style": "path"})
        s3 = session.create_client("s3", region_name="us-east-1", endpoint_url=endpoint,
                                   aws_access_key_id=key["AccessKeyId"],
                                   aws_secret_access_key=key["SecretAccessKey"], config=cfg)
        s3.create_bucket(Bucket=BUCKET)
        bad = session.create_client("s3", region_name="us-east-1", endpoint_url=endpoint,
                                    aws_access_key_id=key["AccessKeyId"],
                                    aws_secret_access_key="not-the-secret", config=cfg)
        try:
            bad.put_object(Bucket=BUCKET, Key="probe", Body=b"x")
            print("SKIP moto took a request signed with the wrong secret", flush=True)
            return 0
        except Exception as e:
            if "SignatureDoesNotMatch" not in str(e):
                print("SKIP moto refused a wrong secret oddly: %s" % e, flush=True)
                return 0
        print("PORT %d KEY %s SECRET %s" % (port, key["AccessKeyId"], key["SecretAccessKey"]),
              flush=True)
        sys.stdin.read()
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        subprocess.run(["rm", "-rf", tmp], check=False)


if __name__ == "__main__":
    sys.exit(main())
