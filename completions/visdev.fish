# fish completion for visdev. Every candidate comes from visdev itself
# (`visdev __complete`), which reads each command's own option table.
function __visdev_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l cands (command $words[1] __complete (count $words) $words $cur 2>/dev/null)
    switch "$cands[1]"
        case @files
            __fish_complete_path $cur
        case @commands
            __fish_complete_command
        case '*'
            printf '%s\n' $cands
    end
end
complete -c visdev -f -a '(__visdev_complete)'
