# Sourced by tests/vllm_venv.sh and tests/vlmevalkit_venv.sh: a virtual environment of its own for a tool whose pins
# clash with the project's, built once and reused while its pins stay the same. The caller sets VENV, PYTHON, PINS,
# PROJECT_DEPS (an array) and STAMP, calls `side_venv_begin NAME`, installs with "${PIP[@]}", then `side_venv_end NAME`.

side_venv_begin() {
    # a venv whose stamp records these pins is current: reuse it as it is; otherwise build it afresh
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS ${PROJECT_DEPS[*]}" ]; then
        echo "$VENV: $1 environment is current ($PINS)"
        exit 0
    fi
    rm -rf "$VENV"
    SIDE_VENV_START=$(date +%s)
    "$PYTHON" -m venv "$VENV"
    PIP=("$VENV/bin/python" -m pip)
    "${PIP[@]}" install -q --upgrade pip
}

side_venv_end() {
    echo "$PINS ${PROJECT_DEPS[*]}" >"$STAMP"
    echo "$VENV: $1 environment built in $(($(date +%s) - SIDE_VENV_START)) s, $(du -sh "$VENV" | cut -f1)"
}
