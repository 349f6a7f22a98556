import sys

# --8<-- [start:main]
def main():
    print("hello")
# --8<-- [end:main]

if __name__ == "__main__":
    main()
