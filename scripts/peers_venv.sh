# Sourced by the benchmark scripts: PyTorch 2.x and JAX from PyPI, in their own virtual environment
# (Debian's python3-torch is 1.13), PEERS_VENV (default ~/.cache/etnn/peers-venv), made on first
# use. Sets peers_python; a missing venv module or network is reported, and the caller skips the
# peers it cannot import.
venv=${PEERS_VENV:-$HOME/.cache/etnn/peers-venv}
peers_python=$venv/bin/python
if ! "$peers_python" -c 'import torch, jax, numpy' 2>/dev/null; then
  echo "$(basename "$0"): installing PyTorch and JAX into $venv (PEERS_VENV)..." >&2
  pip=("$peers_python" -m pip install --quiet --disable-pip-version-check)
  if [ -x "$peers_python" ] || python3 -m venv "$venv"; then
    "$peers_python" -c 'import torch' 2>/dev/null ||
      "${pip[@]}" --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null ||
      "${pip[@]}" torch || true
    "$peers_python" -c 'import jax, numpy' 2>/dev/null || "${pip[@]}" jax jaxlib numpy || true
  else
    echo "$(basename "$0"): python3 -m venv $venv failed (Debian: apt-get install python3-venv)" >&2
  fi
fi
