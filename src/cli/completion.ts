/**
 * Shell completion as kubectl's `completion SHELL`: each script asks `prestage
 * --get-yargs-completions WORDS` for candidates and completes file names when there are none (a
 * bundle directory, a plan file, a kubeconfig). Errors while completing are never printed.
 */
export const COMPLETION_SHELLS = ['bash', 'zsh', 'fish'] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

export function isCompletionShell(value: unknown): value is CompletionShell {
  return (COMPLETION_SHELLS as readonly unknown[]).includes(value);
}

/** The user's login shell, when `completion` names none. */
export function shellFromEnv(shell: string | undefined): CompletionShell {
  const name = (shell ?? '').split('/').pop();
  return isCompletionShell(name) ? name : 'bash';
}

/**
 * Flags only once a `-` is typed (as kubectl's), so that a path argument completes file names;
 * values and commands otherwise.
 */
export function completionCandidates(current: string, found: readonly string[]): string[] {
  const flags = current.startsWith('-');
  return found.filter((word) => word.startsWith('-') === flags);
}

export function completionScript(shell: CompletionShell, scriptName: string): string {
  const fn = `_${scriptName.replace(/\W/g, '_')}_completions`;
  // yargs answers zsh (by $SHELL) with word:description; every script here reads plain words.
  const ask = `SHELL=/bin/sh ${scriptName} --get-yargs-completions`;
  const begin = `###-begin-${scriptName}-completions-###`;
  const end = `###-end-${scriptName}-completions-###`;
  switch (shell) {
    case 'bash':
      return `${begin}
# source <(${scriptName} completion bash), or add it to ~/.bashrc
${fn}() {
  local IFS=$'\\n'
  COMPREPLY=( $(compgen -W "$(${ask} "\${COMP_WORDS[@]:0:COMP_CWORD+1}" 2>/dev/null)" -- "\${COMP_WORDS[COMP_CWORD]}") )
}
# -o default: file names when there is no candidate
complete -o bashdefault -o default -F ${fn} ${scriptName}
${end}
`;
    case 'zsh':
      return `#compdef ${scriptName}
${begin}
# source <(${scriptName} completion zsh) after compinit, or save as _${scriptName} on $fpath
${fn}() {
  local -a found
  found=("\${(@f)$(${ask} "\${(@)words[1,CURRENT]}" 2>/dev/null)}")
  if [[ -n "\${found[1]}" ]]; then
    compadd -- "\${found[@]}"
  else
    _files
  fi
}
compdef ${fn} ${scriptName}
${end}
`;
    case 'fish':
      return `${begin}
# ${scriptName} completion fish > ~/.config/fish/completions/${scriptName}.fish
function ${fn}
    set -l found (env ${ask} (commandline -opc) (commandline -ct) 2>/dev/null)
    if test (count $found) -gt 0
        printf '%s\\n' $found
    else
        __fish_complete_path (commandline -ct)
    end
end
complete -c ${scriptName} -f -a '(${fn})'
${end}
`;
  }
}
