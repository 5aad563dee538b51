from commgroup_lint.entry import main

main()
