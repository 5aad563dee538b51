from commgroup_lint.cli import main

main()
