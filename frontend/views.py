"""The browser library's URLs: ``/client.js``, ``/react.js`` and ``/lib/<digest>/<name>``;
and ``/favicon.ico``, which browsers ask every page of the platform for."""

from __future__ import annotations

from django.conf import settings
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    HttpResponseRedirect,
)
from django.templatetags.static import static
from django.views.decorators.http import require_safe

from frontend.library import FILE_NAME, library
from frontend.sdk import PACKAGE_NAME, sdk_tarball

YEAR_S = 365 * 24 * 3600


def _cors(response: HttpResponse) -> HttpResponse:
    # Any page may import the library as a module (module scripts are fetched with CORS).
    response["Access-Control-Allow-Origin"] = "*"
    response["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response


def _redirect(name: str) -> HttpResponse:
    response = HttpResponseRedirect(f"/lib/{library().digest}/{name}")
    response["Cache-Control"] = "no-cache"
    return _cors(response)


@require_safe
def entry(request: HttpRequest, name: str) -> HttpResponse:
    return _redirect(name)


@require_safe
def library_file(request: HttpRequest, digest: str, name: str) -> HttpResponse:
    current = library()
    if not FILE_NAME.match(name) or name not in current.files:
        raise Http404("no such library file")
    if digest != current.digest:
        return _redirect(name)  # an older version: the current one (never a stale mix)
    response = HttpResponse(current.files[name], content_type=current.content_type(name))
    response["Cache-Control"] = f"public, max-age={YEAR_S}, immutable"
    types = name.removesuffix(".js") + ".d.ts"
    if name.endswith(".js") and types in current.files:
        response["X-TypeScript-Types"] = types  # Deno (and esm.sh-style tools) read it
    return _cors(response)


@require_safe
def sdk_package(request: HttpRequest) -> HttpResponse:
    """The library as an npm package: ``npm install https://PLATFORM/sdk/voice-agent.tgz``."""
    platform_url = settings.PUBLIC_URL or f"{request.scheme}://{request.get_host()}"
    digest, tarball = sdk_tarball(platform_url=platform_url)
    response = HttpResponse(tarball, content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="{PACKAGE_NAME}.tgz"'
    response["Cache-Control"] = "no-cache"  # the same URL gets the library's next version
    response["ETag"] = f'"{digest}"'
    return response


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """Pages without their own icon link (the admin, the API docs) get the dashboard's."""
    return HttpResponsePermanentRedirect(static("dashboard/favicon.svg"))
