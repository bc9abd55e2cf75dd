from lakelog.cli import main

main()
