"""The CLI's commands; each module registers one. Help texts shared by several commands live here."""
RUNS_AS_GIVEN_HELP = ("Read every --runs file as an image-enabled run. By default a file of one model whose name says "
                      "it ran without the image ('(Text Only)', 'blind', 'no image') is read as a blind-arm run, and "
                      "one named as a baseline ('Random-Chance', 'Frequent guess') is left out; the audit says "
                      "which.")
