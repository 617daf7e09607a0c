#!/usr/bin/env bash
# The generated man pages and bash completion (build/man, build/completion):
# one page per command, each renders without a warning, each lists every
# option its --help lists; the completion, sourced in bash, completes
# commands, actions and the options of an action.
# Usage: man_completion.sh BLKCRYPT MAN_DIR COMPLETION_FILE
source "$(dirname "$0")/lib.sh"
MAN_DIR=${2:?usage: $0 BLKCRYPT MAN_DIR COMPLETION_FILE}
COMPLETION=${3:?usage: $0 BLKCRYPT MAN_DIR COMPLETION_FILE}

mapfile -t commands < <("$BLKCRYPT" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
[[ ${#commands[@]} -ge 9 ]] || fail "commands not found in blkcrypt --help"

echo "== one page per command, rendered without warnings"
pages=("$MAN_DIR/blkcrypt.8")
for c in "${commands[@]}"; do pages+=("$MAN_DIR/blkcrypt-$c.8"); done
for p in "${pages[@]}"; do
    [[ -s $p ]] || fail "missing man page $p"
    MANWIDTH=80 man -l -Tutf8 "$p" >"$TMP/page" 2>"$TMP/err" || fail "man -l $p"
    [[ ! -s $TMP/err ]] || fail "man -l $p warns: $(cat "$TMP/err")"
    groff -ww -z -man "$p" 2>"$TMP/err" || fail "groff $p"
    [[ ! -s $TMP/err ]] || fail "groff -ww $p warns: $(cat "$TMP/err")"
    grep -q . "$TMP/page" || fail "$p renders empty"
done
MANWIDTH=80 man -l -Tutf8 "$MAN_DIR/blkcrypt.8" 2>/dev/null | col -b >"$TMP/main"
for c in "${commands[@]}"; do
    grep -q "blkcrypt-$c(8)" "$TMP/main" || fail "blkcrypt(8) does not list blkcrypt-$c(8)"
done

echo "== every page has hand-written prose (cli/man_prose.cpp), and its examples name real commands"
# section PAGE_TEXT NAME: the lines of section NAME of a rendered page.
section() { awk -v s="$2" '/^[A-Z][A-Z ]*$/ { on = ($0 == s); next } on' "$1"; }
# paragraphs: how many blank-line separated paragraphs stdin has.
paragraphs() { awk 'NF && !in_para { n++ } { in_para = NF > 0 } END { print n + 0 }'; }
for p in "$MAN_DIR/blkcrypt.8" "$MAN_DIR"/blkcrypt-*.8; do
    MANWIDTH=200 man -l -Tascii "$p" 2>/dev/null | col -bx >"$TMP/page"
    # The generated DESCRIPTION is one paragraph (the command's summary); the prose adds more.
    n=$(section "$TMP/page" DESCRIPTION | paragraphs)
    [[ $n -ge 2 ]] || fail "$(basename "$p"): DESCRIPTION has $n paragraph(s), no prose (cli/man_prose.cpp)"
    section "$TMP/page" EXAMPLES >"$TMP/examples"
    grep -q 'blkcrypt ' "$TMP/examples" || fail "$(basename "$p"): no EXAMPLES section"
    # An action's tag is indented by 7 columns, its text by more.
    section "$TMP/page" ACTIONS | sed -n 's/^       \([a-z][a-z0-9-]*\).*/\1/p' >"$TMP/actions"
    while read -r cmd second _; do
        "$BLKCRYPT" help "$cmd" >/dev/null 2>&1 || fail "$(basename "$p"): example runs unknown command '$cmd'"
        # On a page with actions, an example of that command names one of them.
        [[ -s $TMP/actions && $p == */blkcrypt-$cmd.8 && $second != -* ]] || continue
        grep -qx -- "$second" "$TMP/actions" || fail "$(basename "$p"): example runs unknown action '$cmd $second'"
    done < <(sed -n 's/^ *blkcrypt \([^ ]*\) *\([^ ]*\).*/\1 \2/p' "$TMP/examples")
done
# Break the prose on purpose: a page without it must fail the check above.
sed '/^\.SH DESCRIPTION/,/^\.SH /{/^\.PP/,/^\.SH /{/^\.SH /!d}}' "$MAN_DIR/blkcrypt-luks.8" >"$TMP/bare.8"
MANWIDTH=200 man -l -Tascii "$TMP/bare.8" 2>/dev/null | col -bx >"$TMP/page"
[[ $(section "$TMP/page" DESCRIPTION | paragraphs) -eq 1 ]] || fail "the prose check cannot tell a page without prose"

echo "== fsverity's sign and verify-sig have pages of their own, each with its options"
for sub in sign verify-sig; do
    page=$MAN_DIR/blkcrypt-fsverity-$sub.8
    [[ -s $page ]] || fail "missing man page $page"
    grep -q "blkcrypt-fsverity-$sub(8)" "$TMP/main" || fail "blkcrypt(8) does not list blkcrypt-fsverity-$sub(8)"
    MANWIDTH=200 man -l -Tascii "$page" 2>/dev/null | col -b >"$TMP/page"
    mapfile -t opts < <("$BLKCRYPT" fsverity $sub --help | grep -oE '^  (-[a-zA-Z] \[ )?--[a-z0-9_-]+' | grep -oE -- '--[a-z0-9_-]+')
    [[ ${#opts[@]} -ge 2 ]] || fail "no options in blkcrypt fsverity $sub --help"
    for o in "${opts[@]}"; do
        grep -qE -- "(^|[ ,])$o( |$)" "$TMP/page" || fail "blkcrypt-fsverity-$sub(8) lacks $o"
    done
done

echo "== each page lists every option of the command's --help"
for c in "${commands[@]}"; do
    help=(--help)
    [[ $c == fsverity ]] && help=(digest --help)
    MANWIDTH=200 man -l -Tascii "$MAN_DIR/blkcrypt-$c.8" 2>/dev/null | col -b >"$TMP/page"
    mapfile -t opts < <("$BLKCRYPT" "$c" "${help[@]}" | grep -oE '^  (-[a-zA-Z] \[ )?--[a-z0-9_-]+' | grep -oE -- '--[a-z0-9_-]+')
    [[ ${#opts[@]} -gt 0 ]] || fail "no options in blkcrypt $c --help"
    for o in "${opts[@]}"; do
        grep -qE -- "(^|[ ,])$o( |$)" "$TMP/page" || fail "blkcrypt-$c(8) lacks $o"
    done
done

echo "== bash completion"
bash -n "$COMPLETION" || fail "completion script does not parse"
# complete WORD...: COMPREPLY for the last word, as bash fills it on TAB.
complete_words() {
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _blkcrypt
             printf "%s\n" "${COMPREPLY[@]}"' _ "$COMPLETION" "$@"
}
expect_completion() {
    local want=$1
    shift
    got=$(complete_words "$@" | tr '\n' ' ')
    [[ " $got " == *" $want "* ]] || fail "completing '$*' gave '$got', want $want"
}
refuse_completion() {
    local bad=$1
    shift
    got=$(complete_words "$@" | tr '\n' ' ')
    [[ " $got " != *" $bad "* ]] || fail "completing '$*' offers $bad"
}
bash -c 'source "$1"; complete -p blkcrypt' _ "$COMPLETION" | grep_q _blkcrypt || fail "complete -F _blkcrypt not registered"
[[ $(complete_words blkcrypt ver) == verity ]] || fail "blkcrypt ver<TAB>: $(complete_words blkcrypt ver)"
expect_completion crypt blkcrypt --plugin x.so cr
expect_completion format blkcrypt verity fo
expect_completion --hash blkcrypt verity format --ha
expect_completion --hash-block-size blkcrypt verity format --ha
expect_completion --salt blkcrypt verity format --hash sha256 data --sa
expect_completion --show-key blkcrypt crypt table --sh
refuse_completion --show-key blkcrypt crypt encrypt --sh
refuse_completion --threads blkcrypt verity dump --th
expect_completion --json blkcrypt hash --alg sha256 --js
expect_completion --for-builtin-sig blkcrypt fsverity digest --for
# Files after an option that takes one, and as arguments.
touch "$TMP/keyfile.bin"
expect_completion "$TMP/keyfile.bin" blkcrypt crypt encrypt --key-file "$TMP/keyf"
expect_completion "$TMP/keyfile.bin" blkcrypt hash --alg sha256 "$TMP/keyf"
# cryptsetup's action names (blkcrypt --help lists them) complete as words,
# and after one its command's options for that action.
mapfile -t aliases < <("$BLKCRYPT" --help | sed -n '/^cryptsetup.s names/,/^$/s/^  \([a-zA-Z]*\) .*/\1/p')
[[ ${#aliases[@]} -ge 10 ]] || fail "aliases not found in blkcrypt --help"
for a in "${aliases[@]}"; do expect_completion "$a" blkcrypt "$a"; done
expect_completion --dump-volume-key blkcrypt luksDump --dump-v
expect_completion --tcrypt-hidden blkcrypt tcryptDump --tcrypt-h
expect_completion --dump-volume-key blkcrypt bitlkDump --dump-v
refuse_completion --in-place blkcrypt tcryptDump --in-
expect_completion --veracrypt blkcrypt tcrypt dump --veracr
expect_completion --disable-locks blkcrypt bitlk dump --disable-l
# Option values the option names (luks1|luks2, off|on|require).
expect_completion luks2 blkcrypt luks format --type l
expect_completion argon2id blkcrypt luks add-key --pbkdf a
expect_completion prefer blkcrypt luksFormat --priority p
expect_completion require blkcrypt serve --tls r
expect_completion tcrypt blkcrypt tcrypt dump --type t
echo "man page and completion tests passed"
