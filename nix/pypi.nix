# Python packages hive needs at versions nixpkgs' python3Packages may not have (as of nixpkgs
# 2026-06: mcp 1.27.1 where hive asks for 2.3 or newer, agent-client-protocol 0.8.1 where it
# asks for 0.12.1, and the httpx2, httpcore2 and mcp-types that mcp 2.3 asks for).
# nix/package.nix builds one of these from its PyPI sdist only where the version nixpkgs has
# does not meet what is asked of it, so a newer nixpkgs takes over by itself.
#
# For each: the sdist's file name prefix (what fetchPypi's `pname` must be), the SHA-256 of the
# file PyPI serves, the build system its pyproject.toml names, the module it must import, and
# its Requires-Dist for Linux with no extras (markers dropped; where two apply on different
# Pythons, both). nix/tests/pypi-pins.py downloads each file and checks all of that.
{
  mcp = {
    version = "2.3.0";
    sdist = "mcp";
    hash = "sha256-ixR6UEQc8FnciMaE4K7tNofwqg85xs3nuQMw7/0rNNg=";
    build-system = [
      "hatchling"
      "uv-dynamic-versioning"
    ];
    imports = "mcp";
    requires = [
      "anyio>=4.10"
      "anyio>=4.9"
      "httpx2>=2.10.0"
      "jsonschema>=4.20.0"
      "mcp-types==2.3.0"
      "opentelemetry-api>=1.28.0"
      "pydantic>=2.12.0"
      "pyjwt[crypto]>=2.10.1"
      "python-multipart>=0.0.9"
      "sse-starlette>=3.0.0"
      "starlette>=0.27"
      "starlette>=0.48.0"
      "typing-extensions>=4.13.0"
      "typing-inspection>=0.4.1"
      "uvicorn>=0.31.1"
    ];
  };

  mcp-types = {
    version = "2.3.0";
    sdist = "mcp_types";
    hash = "sha256-0eRlSe2zXuGalJQPzubRrd1+WJq36pLdqD9dhHgfw2I=";
    build-system = [
      "hatchling"
      "uv-dynamic-versioning"
    ];
    imports = "mcp_types";
    requires = [
      "pydantic>=2.12.0"
      "typing-extensions>=4.13.0"
    ];
  };

  httpx2 = {
    version = "2.17.0";
    sdist = "httpx2";
    hash = "sha256-gH2es5PI2MIKzPM6alljQ9/abHzby5cu1BY8kA3N+J8=";
    build-system = [
      "hatchling"
      "hatch-fancy-pypi-readme"
      "uv-dynamic-versioning"
    ];
    imports = "httpx2";
    requires = [
      "anyio>=4.10"
      "httpcore2==2.17.0"
      "idna>=3.18"
      "truststore>=0.10"
      "typing-extensions>=4.5.0"
    ];
  };

  httpcore2 = {
    version = "2.17.0";
    sdist = "httpcore2";
    hash = "sha256-z2UrH46JKtpKsYmzlcREyjr76ky5oF+ag1lDEijA0EA=";
    build-system = [
      "hatchling"
      "hatch-fancy-pypi-readme"
      "uv-dynamic-versioning"
    ];
    imports = "httpcore2";
    requires = [
      "h11>=0.16"
      "truststore>=0.10"
    ];
  };

  agent-client-protocol = {
    version = "0.12.1";
    sdist = "agent_client_protocol";
    hash = "sha256-mWPMtZDtltfcVCycAj6QZ2/HaxxlYuIanuES9PvLAJU=";
    build-system = [ "pdm-backend" ];
    imports = "acp";
    requires = [ "pydantic>=2.7" ];
  };
}
