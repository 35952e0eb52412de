"""A real SMTP server for Slipway's notification tests: aiosmtpd (Debian's python3-aiosmtpd).

Started by testenv.StartSMTP. Every message it accepts is written to --out as <n>.json: the envelope,
the data as received, whether the session was encrypted and how the client authenticated. It prints
"ready <port>" once it listens and runs until killed.
"""
import argparse
import hmac
import json
import os
import secrets
import signal
import ssl

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import MISSING, AuthResult, LoginPassword

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--out", required=True)
p.add_argument("--cert")
p.add_argument("--key")
p.add_argument("--tls", choices=["none", "starttls", "implicit"], default="none")
p.add_argument("--user", default="")
p.add_argument("--password", default="")
p.add_argument("--mechanisms", default="PLAIN,LOGIN,CRAM-MD5")
p.add_argument("--refuse", default="", help="comma-separated recipients refused at RCPT")
args = p.parse_args()
user, password = args.user.encode(), args.password.encode()
refused = {r for r in args.refuse.split(",") if r}


def mechanism_of(session):
    return getattr(session, "slipway_mechanism", "")


class Handler:
    count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in refused:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        Handler.count += 1
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "data": envelope.original_content.decode("utf-8", "replace"),
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "mechanism": mechanism_of(session),
            "login": (session.login_data or b"").decode() if isinstance(session.login_data, bytes) else "",
            "helo": session.host_name or "",
        }
        tmp = os.path.join(args.out, ".%d.json" % Handler.count)
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(args.out, "%d.json" % Handler.count))
        return "250 Message accepted for delivery"

    # CRAM-MD5 (RFC 2195), which aiosmtpd does not build in: the method name's "__" is its "-".
    async def auth_CRAM__MD5(self, server, args_):
        challenge = ("<%s@slipway-test>" % secrets.token_hex(8)).encode()
        response = await server.challenge_auth(challenge)
        if response is MISSING:
            return AuthResult(success=False)
        login, _, digest = response.partition(b" ")
        want = hmac.new(password, challenge, "md5").hexdigest().encode()
        ok = bool(user) and login == user and hmac.compare_digest(digest, want)
        if ok:
            server.session.slipway_mechanism = "CRAM-MD5"
        return AuthResult(success=ok, handled=False, auth_data=LoginPassword(login, b""))


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = bool(user) and auth_data.login == user and hmac.compare_digest(auth_data.password, password)
    if ok:
        session.slipway_mechanism = mechanism
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself


context = None
if args.tls != "none":
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)

keep = {m.strip().upper() for m in args.mechanisms.split(",") if m.strip()}
kwargs = dict(
    hostname="127.0.0.1",
    port=args.port,
    authenticator=authenticator,
    auth_required=bool(args.user),
    # aiosmtpd counts only STARTTLS as TLS for AUTH; an implicit-TLS session is encrypted from the start.
    auth_require_tls=args.tls == "starttls",
    auth_exclude_mechanism=[m for m in ("PLAIN", "LOGIN", "CRAM-MD5") if m not in keep],
)
if args.tls == "starttls":
    kwargs.update(tls_context=context, require_starttls=True)
elif args.tls == "implicit":
    kwargs.update(ssl_context=context)
controller = Controller(Handler(), **kwargs)
controller.start()
print("ready", args.port, flush=True)
signal.signal(signal.SIGTERM, lambda *_: (controller.stop(), os._exit(0)))
while True:
    signal.pause()
