# One image for every service of compose.yaml (docs/compose.md): git, an ssh client and
# agent-registry with its dashboard (web), watchdog (notify) and MCP extras.  Built from
# Debian and PyPI packages only; no secret goes into it (ssh keys and git config are
# mounted read-only at run time).
FROM debian:bookworm-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates git openssh-client python3 python3-venv tini \
    && rm -rf /var/lib/apt/lists/*

# the bind-mounted repository belongs to the host's user, not the container's: let git
# work in it anyway (it refuses "dubious ownership" otherwise)
RUN git config --system safe.directory '*'

COPY pyproject.toml README.md LICENSE /src/
COPY agent_registry /src/agent_registry
COPY templates /src/templates
COPY hooks /src/hooks
RUN python3 -m venv /opt/agent-registry \
    && /opt/agent-registry/bin/pip install --no-cache-dir '/src[web,notify,mcp]' \
    && rm -rf /src
ENV PATH=/opt/agent-registry/bin:$PATH

# a home for whichever uid compose runs as: ~/.ssh and ~/.gitconfig are mounted into it
RUN mkdir -p /home/agent && chmod 1777 /home/agent
ENV HOME=/home/agent
WORKDIR /repo

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["agent-registry", "--help"]
