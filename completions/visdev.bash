# bash completion for visdev. Every candidate comes from visdev itself
# (`visdev __complete`), which reads each command's own option table.
_visdev() {
	local cur=${COMP_WORDS[COMP_CWORD]} cands
	# "--policy=" split by bash: the '=' is no part of the value
	[[ $cur == = ]] && cur=
	cands=$("${COMP_WORDS[0]}" __complete "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null) || return
	case $cands in
	@files)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		;;
	@commands)
		mapfile -t COMPREPLY < <(compgen -c -- "$cur")
		;;
	*)
		mapfile -t COMPREPLY < <(compgen -W "$cands" -- "$cur")
		;;
	esac
}
complete -F _visdev visdev
