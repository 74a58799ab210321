"""The review server's own login: the login and logout pages and routes, and the session cookie.

``POST /login`` (a plain HTML form, no script) checks the password under the
:class:`~builders.pipeline.review.accounts.LoginPolicy` throttle and issues a new random session token in an
``HttpOnly; SameSite=Strict`` cookie (``Secure`` when the request came over HTTPS), ending the session the browser
presented before (rotation at login). ``POST /logout`` (the page's "Log out" button, a form) ends it; ``GET /logout``
changes nothing (it shows that button). Apart from the gate (:mod:`~builders.pipeline.review.gate`), which checks the
cookie on every other request, because these are the only routes that create or end a session.
"""

from html import escape


COOKIE = "sureon_review_session"


def cookie_token(headers: dict[bytes, bytes]) -> str | None:
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


def session_cookie(token: str, secure: bool, max_age: float) -> str:
    attributes = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={int(max_age)}"
    return attributes + ("; Secure" if secure else "")


def cleared_cookie(secure: bool) -> str:
    return f"{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" + ("; Secure" if secure else "")


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sureon expert review: log in</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }}
label, input, button {{ display: block; width: 100%; box-sizing: border-box; font-size: 1rem; }}
input {{ margin: .25rem 0 1rem; padding: .5rem; }} button {{ padding: .6rem; }}
.message {{ padding: .5rem; background: #fef3c7; border-left: 4px solid #d97706; }}
</style></head>
<body><h1>Sureon expert review</h1>{message}
<form method="post" action="/login">
<label for="username">Username</label><input id="username" name="username" autocomplete="username" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Log in</button>
</form></body></html>
"""


def login_page(message: str = "") -> str:
    return LOGIN_PAGE.format(message=f"<p class='message' role='alert'>{escape(message)}</p>" if message else "")


LOGOUT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sureon expert review: log out</title>
<style>body {{ font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }}</style>
</head><body><h1>Sureon expert review</h1>{form}<p><a href="/">Back to the review</a></p></body></html>
"""


def add_login_routes(app, ui) -> None:
    """Add ``/login`` and ``/logout`` (GET and POST) to the FastAPI ``app``; ``ui``: the
    :class:`~builders.pipeline.review.app.ReviewUI` that checks passwords and sessions."""
    import asyncio

    from fastapi import Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import HTMLResponse, RedirectResponse

    from builders.pipeline.review.app import LOGOUT_FORM

    def client_of(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    @app.get("/login", response_class=HTMLResponse)
    async def login_form(out: str = ""):
        return HTMLResponse(login_page("You are logged out." if out else ""))

    @app.post("/login", response_class=HTMLResponse)
    async def login(request: Request):
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return HTMLResponse(login_page("Log in with the form."), status_code=415)
        form = await request.form()
        username, password = str(form.get("username", "")), str(form.get("password", ""))
        client = client_of(request)
        attempt = await run_in_threadpool(ui.begin_login, username, client)
        if not attempt.allowed:
            return HTMLResponse(login_page(ui.refusal(attempt)), status_code=429)
        if attempt.wait_s:  # the slow-down: awaited, so it holds no worker thread
            await asyncio.sleep(attempt.wait_s)
        token, message = await run_in_threadpool(
            ui.finish_login, username, password, client, attempt, request.cookies.get(COOKIE)
        )
        if token is None:
            return HTMLResponse(login_page(message), status_code=401)
        response = RedirectResponse("/", status_code=303)
        secure = request.url.scheme == "https"
        response.headers["set-cookie"] = session_cookie(token, secure, ui.session_policy.max_age_s)
        return response

    @app.get("/logout", response_class=HTMLResponse)
    async def logout_form():  # changes nothing (an <img> may send a GET): the button that posts /logout
        return HTMLResponse(LOGOUT_PAGE.format(form=LOGOUT_FORM))

    @app.post("/logout")  # the gate checked that it comes from this origin (Origin, else Referer)
    async def logout(request: Request):
        await run_in_threadpool(ui.logout, request.cookies.get(COOKIE), client_of(request))
        response = RedirectResponse("/login?out=1", status_code=303)
        response.headers["set-cookie"] = cleared_cookie(request.url.scheme == "https")
        return response
