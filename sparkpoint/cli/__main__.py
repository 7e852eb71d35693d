from sparkpoint.cli import main

main()
