/* tests gateway/guard.c: each rule on pairs written for this test (not the benchmark's),
 * paraphrases that must pass, empty and odd input, non-ASCII text, lengths that are not
 * NUL-terminated, and the cost of one check. */
#include "guard.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int check(const char *a, const char *b, char *why, size_t whylen)
{
    return gw_guard_compatible(a, strlen(a), b, strlen(b), why, whylen);
}

/* Asserts the verdict both ways round, and that a veto says why (mentioning `word`). */
static void expect(const char *a, const char *b, int ok, const char *word)
{
    char why[128];
    int r = check(a, b, why, sizeof why);
    cr_expect_eq(r, ok, "\"%s\" vs \"%s\": got %d (%s), want %d", a, b, r, why, ok);
    if (!r)
        cr_expect(why[0] != 0, "\"%s\" vs \"%s\": a veto with no reason", a, b);
    else
        cr_expect_str_eq(why, "");
    if (!r && word)
        cr_expect(strstr(why, word) != NULL, "\"%s\" vs \"%s\": reason \"%s\" lacks \"%s\"", a, b,
                  why, word);
    int r2 = check(b, a, why, sizeof why);
    cr_expect_eq(r2, ok, "\"%s\" vs \"%s\" (swapped): got %d (%s), want %d", b, a, r2, why, ok);
}

#define PASS(a, b) expect(a, b, 1, NULL)
#define VETO(a, b, word) expect(a, b, 0, word)

Test(guard, paraphrases_pass)
{
    PASS("what is the boiling point of mercury", "What is the boiling point of mercury?");
    PASS("How big is Jupiter?", "What's Jupiter's size?");
    PASS("What is the currency of Japan?", "What's Japan's currency?");
    PASS("How old is the Great Wall of China?", "What is the age of the Great Wall of China?");
    PASS("How high is the Eiffel Tower?", "How tall is the Eiffel Tower?");
    PASS("How do I fix a flat bike tire?", "How can I repair a flat bike tire?");
    PASS("Explain how a compiler works.", "How does a compiler work?");
    PASS("Who invented the printing press?", "Who is the inventor of the printing press?");
    PASS("How many hours are in a week?", "A week has how many hours?");
    PASS("What does CPU stand for?", "CPU is short for what?");
    PASS("How do I parse JSON in Go?", "In Go, how can I parse JSON?");
    PASS("Is it safe to eat raw oysters?", "Can I safely eat raw oysters?");
    PASS("What's the biggest desert in the world?", "Which desert is the largest on the planet?");
    PASS("How do I change my email address?", "How do I update my e-mail address?");
    PASS("How do I set up a website?", "How do I set up a web site?");
    PASS("Can't connect to the printer, what should I do?",
         "What should I do if I cannot connect to the printer?");
    PASS("Why is the printer not working?", "Why doesn't the printer work?");
    PASS("Is it unsafe to run with a cold?", "Is it not safe to run with a cold?");
    PASS("Is sugar bad for teeth?", "Is sugar not good for teeth?");
    PASS("What does NASA do?", "What does the National Aeronautics and Space Administration do?");
    PASS("How To Bake Sourdough Bread", "how do i bake sourdough bread");
    PASS("HOW DO I BAKE SOURDOUGH BREAD", "How do I bake sourdough bread?");
    PASS("What's the 2nd largest city in Spain?", "What is the second largest city in Spain?");
    PASS("How many meters are in 3 km?", "How many meters are in three km?");
    PASS("Name twenty-five animals.", "Name 25 animals.");
    PASS("How much is a dozen eggs?", "How much do 12 eggs cost?");
    PASS("Give me a recipe for cookies.", "Give me a cookie recipe, please.");
    PASS("How do I install a package with pip?", "How do I install packages with pip?");
    PASS("How do I sign the form?", "How do I sign the form");
}

Test(guard, numbers)
{
    VETO("What is 12% of 80?", "What is 18% of 80?", "12");
    VETO("Convert 5 miles to km", "Convert 8 miles to km", "numbers");
    VETO("Who was the third king of France?", "Who was the fourth king of France?", "3");
    VETO("What happened in 1066?", "What happened in 1067?", "1066");
    VETO("Is 3.10 newer than 3.9?", "Is 3.1 newer than 3.9?", "3.1");
    VETO("What is the 5th planet?", "What is the sixth planet?", "numbers");
    VETO("Give me two reasons to exercise", "Give me reasons to exercise", "numbers");
    VETO("What is Python 3?", "What is Python 2?", "numbers");
    VETO("How did Louis XIV die?", "How did Louis XVI die?", "numbers");
    VETO("How many people live in a city of 2 million?",
         "How many people live in a city of 3 "
         "million?",
         "numbers");
    PASS("What is 1,000 times 3?", "What's 1000 times three?");
    PASS("Write one poem about rain", "Write a poem about rain");
    PASS("Once I install Python, how do I run a script?",
         "After installing Python, how do I run a script?");
    VETO("Should I use single quotes?", "Should I use double quotes?", "numbers");
}

Test(guard, negation)
{
    VETO("Which plants are toxic to cats?", "Which plants are not toxic to cats?", "negation");
    VETO("Why does my car start?", "Why won't my car start?", "negation");
    VETO("Can I travel with a passport?", "Can I travel without a passport?", "negation");
    VETO("Should I ever reheat rice?", "Should I never reheat rice?", "negation");
    PASS("Why won't my phone charge?", "Why isn't my phone charging?");
    /* prevention: "keep / stop / protect X from doing" negates the doing */
    VETO("How do I keep my screen from turning off?", "How do I make my screen turn off?",
         "negation");
    VETO("How do I stop my cat from scratching the sofa?",
         "How do I get my cat to scratch the "
         "sofa?",
         "negation");
    PASS("How do I keep my screen from turning off?", "How can I stop my screen from turning off?");
    PASS("How do I prevent my pipes from freezing?", "How do I keep my pipes from freezing?");
    PASS("How do I stop my dog from barking at night?",
         "How can I get my dog to quit barking at night?");
    PASS("How far is the airport from the hotel?", "What is the distance from the hotel to "
                                                   "the airport?");
}

Test(guard, opposites)
{
    VETO("How do I turn on Bluetooth?", "How do I turn off Bluetooth?", "on");
    VETO("How do I mute a call?", "How do I unmute a call?", "mute");
    VETO("How do I encrypt a file?", "How do I decrypt a file?", "encrypt");
    VETO("How do I upload a photo?", "How do I download a photo?", "upload");
    VETO("How do I zoom in on a map?", "How do I zoom out on a map?", "in");
    VETO("Is it better to rent?", "Is it worse to rent?", "better");
    VETO("Which is the hottest month?", "Which is the coldest month?", "hottest");
    VETO("How do I lock the door remotely?", "How do I unlock the door remotely?", "lock");
    VETO("What is the maximum speed of a bicycle?", "What is the minimum speed of a bicycle?",
         "maximum");
    VETO("How do I make text uppercase?", "How do I make text lowercase?", "uppercase");
    VETO("How do I reconnect my mouse?", "How do I disconnect my mouse?", NULL);
    VETO("Is the action reversible?", "Is the action irreversible?", "reversible");
    VETO("Are the results valid?", "Are the results invalid?", "valid");
    VETO("Why do I feel happy?", "Why do I feel unhappy?", "happy");
    VETO("Is the tool useful?", "Is the tool useless?", "useful");
    VETO("What should I wear in summer?", "What should I wear in winter?", "summer");
    VETO("What's on TV on Monday?", "What's on TV on Friday?", "monday");
    VETO("How do I say hello in German?", "How do I say hello in Italian?", NULL);
    VETO("How do I read a file in rust?", "How do I read a file in ruby?", "rust");
    VETO("How do I convert kelvin to celsius?", "How do I convert kelvin to fahrenheit?", NULL);
    VETO("How do I increase the volume?", "How do I reduce the volume?", "increase");
    VETO("How do I enable dark mode?", "How do I disable dark mode?", "enable");
}

Test(guard, names)
{
    VETO("What is the capital of Peru?", "What is the capital of Chile?", "peru");
    VETO("Who directed Jaws?", "Who directed Alien?", "jaws");
    VETO("What does the FBI do?", "What does the CIA do?", "fbi");
    VETO("What does `os.walk` return?", "What does `os.listdir` return?", "os.walk");
    VETO("How do I call my_func twice?", "How do I call my_other_func twice?", "my_func");
    VETO("Is \"affect\" a verb?", "Is \"effect\" a verb?", "affect");
    VETO("How do I reset my iPhone?", "How do I reset my iPad?", "iphone");
    VETO("How do I free memory in C?", "How do I free memory in C++?", "c");
    PASS("How do I update macOS?", "How do I update my Mac OS?");
    PASS("What is the capital of France?", "what is the capital of france");
    PASS("Where is Kenya?", "Where is Kenya located?");
    PASS("What's Canada's population?", "What is the population of Canada?");
    PASS("How do I learn JavaScript?", "How do I learn Java Script?");
}

Test(guard, one_word_swap)
{
    VETO("How do I clean a wool sweater?", "How do I clean a leather sweater?", "wool");
    VETO("What do koalas eat?", "What do sloths eat?", "koalas");
    VETO("How long do I bake salmon?", "How long do I bake chicken?", "salmon");
    VETO("What are the causes of insomnia?", "What are the causes of migraines?", "insomnia");
    VETO("How do I prune a rose bush?", "How do I prune an apple tree?", NULL);
    VETO("Why do onions make you cry?", "Why do onions make you sneeze?", "cry");
    VETO("When was the Eiffel Tower built?", "Where was the Eiffel Tower built?", "when");
    VETO("Who wrote the Odyssey?", "When was the Odyssey written?", NULL);
    /* morphological variants and synonyms are not swaps */
    PASS("How do I clean a leather couch?", "How do I clean a leather sofa?");
    PASS("How do I start exercising?", "How do I begin exercising?");
    PASS("What is the best way to learn chess?", "What is the best method to learn chess?");
    PASS("Tips for running a marathon", "Tips for run a marathon");
    PASS("Why do cats knead?", "What is the reason cats knead?");
}

Test(guard, tense)
{
    VETO("Who is the CEO of Twitter?", "Who was the CEO of Twitter?", "tense");
    VETO("What did people in Rome eat?", "What do people in Rome eat?", "tense");
    VETO("Where were the Olympics held?", "Where are the Olympics held?", "tense");
    /* tense alone, among other rewording, is not the difference */
    PASS("Who wrote War and Peace?", "Who is the author of War and Peace?");
    PASS("When did the Berlin Wall fall?", "What year did the Berlin Wall fall?");
    PASS("When was the telescope invented?", "In which century was the telescope invented?");
    VETO("When did the Berlin Wall fall?", "Why did the Berlin Wall fall?", "when");
    PASS("How can I learn to swim?", "How do I learn to swim?");
    /* an irregular verb's past against its present, after a question word */
    VETO("Who sings the national anthem at the Super Bowl?",
         "Who sang the national anthem at the Super Bowl?", "tense");
    VETO("What broke the dam in 1976?", "What breaks the dam in 1976?", "tense");
    PASS("Who wrote Don Quixote?", "Who has written Don Quixote?");
    PASS("Who sang the national anthem at the Super Bowl?",
         "Who was it that sang the national anthem at the Super Bowl?");
}

Test(guard, added_qualifier)
{
    VETO("Give me a recipe for chili.", "Give me a recipe for vegetarian chili.", "vegetarian");
    VETO("What are the signs of dehydration?", "What are the early signs of dehydration?", "early");
    VETO("What are good exercises?", "What are good exercises for seniors?", "seniors");
    VETO("What causes a fever?", "What causes a fever in toddlers?", "toddlers");
    /* the setting the question already implies is not a narrowing */
    PASS("What is a foreign key?", "What is a foreign key in a database?");
    PASS("How do I check my tire pressure?", "How do I check the tire pressure in my car?");
    PASS("Who directed Jaws?", "Who directed the movie Jaws?");
    /* words that do not narrow: a verb after its subject, a framing noun, an adverb, an
     * added noun that the phrase already implied */
    PASS("Why is grass green?", "What makes grass appear green?");
    PASS("What is the meaning of the word \"serendipity\"?", "What does serendipity mean?");
    PASS("How do I iron a shirt?", "How do I quickly iron a shirt?");
    PASS("What is the capital of Peru?", "What is the capital city of Peru?");
    PASS("What's a good lunch?", "What should I eat for a good lunch?");
    VETO("Give me a brownie recipe.", "Give me a gluten-free brownie recipe.", NULL);
    VETO("When is the best time to visit Norway?",
         "When is the best time to visit Norway to watch whales and hike glaciers?", NULL);
    PASS("What shoes are best for flat feet?", "What shoes are best for people with flat feet?");
}

Test(guard, one_or_all)
{
    VETO("How do I delete one branch in git?", "How do I delete all branches in git?", "scope");
    VETO("How do I mute a single chat?", "How do I mute every chat?", "scope");
    PASS("How do I delete all branches in git?", "How do I delete every branch in git?");
}

Test(guard, traded_places)
{
    /* the two sides of "x and y", "x or y", neighbours */
    PASS("What is the difference between affect and effect?",
         "What's the difference between effect and affect?");
    PASS("Is a tomato a fruit or a vegetable?", "Is a tomato a vegetable or a fruit?");
    PASS("Who won the match yesterday?", "Who won yesterday's match?");
    VETO("Can I use butter instead of margarine?", "Can I use margarine instead of butter?",
         "order");
    VETO("Did Ali ever beat Frazier?", "Did Frazier ever beat Ali?", "order");
    /* neighbours before a noun say whose it is */
    VETO("Is it OK to give my rabbit guinea pig pellets?",
         "Is it OK to give my guinea rabbit pig pellets?", "order");
    VETO("Can horses eat cow feed?", "Can cows eat horse feed?", NULL);
    PASS("Can I drink milk raw?", "Can I drink raw milk?");
    /* names of several words */
    VETO("Did Rafael Nadal beat Roger Federer at Wimbledon?",
         "Did Roger Federer beat Rafael Nadal at Wimbledon?", "order");
    VETO("did real madrid beat manchester city in the final",
         "did manchester city beat real madrid in the final", "order");
    PASS("What's the difference between Rio de Janeiro and Sao Paulo?",
         "What's the difference between Sao Paulo and Rio de Janeiro?");
    PASS("How do I convert a string to an integer in Java?",
         "In Java, how do I convert a string to an integer?");
}

Test(guard, time_read_against_now)
{
    VETO("Who won the Super Bowl this year?", "Who won the Super Bowl last year?", "time");
    VETO("What are the tax brackets for next year?", "What are the tax brackets this year?",
         "time");
    VETO("Who won the Super Bowl?", "Who won the Super Bowl last year?", NULL);
    PASS("What were the best movies of the year?", "What were the best movies this year?");
    PASS("Who won the game last night?", "Who won last night's game?");
    PASS("How do I create a branch in git?", "How do I create a new branch in git?");
}

Test(guard, how_and_other_question_words)
{
    VETO("Who invented the telephone?", "How was the telephone invented?", "question");
    VETO("How do I water succulents?", "When should I water succulents?", "question");
    PASS("When did the Titanic sink?", "How long ago did the Titanic sink?");
    PASS("How do I find my IP address?", "Where can I find my IP address?");
}

Test(guard, short_names)
{
    PASS("How do I parse JSON in JavaScript?", "How do I parse JSON in JS?");
    PASS("How deep is Lake Baikal?", "How deep is Baikal?");
    /* words one letter apart are two words */
    VETO("What is my ideal weight?", "What is my ideal height?", NULL);
    VETO("Is ethanol safe to drink?", "Is methanol safe to drink?", NULL);
}

Test(guard, order)
{
    VETO("Convert pounds to kilograms", "Convert kilograms to pounds", "order");
    VETO("Translate this from Spanish into English",
         "Translate this from English into "
         "Spanish",
         NULL);
    VETO("Is a lion stronger than a tiger?", "Is a tiger stronger than a lion?", "order");
    PASS("Convert pounds to kilograms", "How do I convert pounds into kilograms?");
}

Test(guard, numbers_in_another_order)
{
    VETO("Is a 4 by 8 sheet enough for a 3 by 5 table?",
         "Is a 3 by 5 sheet enough for a 4 by 8 table?", "another order");
    VETO("Convert 20 to 10 on the scale", "Convert 10 to 20 on the scale", "order");
    PASS("How many grams are in 2 cups of flour?", "2 cups of flour is how many grams?");
    /* a number that keeps its word is a sentence reordered */
    PASS("Who won the 100m sprint in 2020?", "In 2020, who won the 100m sprint?");
    PASS("How long do I cook a 5 lb chicken at 350 degrees?",
         "At 350 degrees, how long do I cook a 5 lb chicken?");
    PASS("What is 10 minus 5?", "What do you get if you subtract 5 from 10?");
    PASS("What is 3 times 4?", "What's 3 times 4?");
}

Test(guard, direction_and_amounts)
{
    VETO("Translate 'good morning' into Spanish.", "Translate 'good morning' from Spanish.",
         "direction");
    VETO("How long does it take to fly from London to Paris?",
         "How much does it cost to fly from London to Paris?", "how long vs how much");
    PASS("How long does a flight from London to Paris take?",
         "How many hours is the flight from London to Paris?");
    PASS("How often should I feed my puppy?", "How many times a day should a puppy be fed?");
    PASS("How soon can I get a refund?", "How long does it take to get a refund?");
    PASS("How old do you have to be to vote?", "How many years old do you need to be to vote?");
    /* a rate in time is what an amount question implies */
    PASS("How much water should I drink?", "How much water should I drink per day?");
    PASS("What is the average salary of a nurse?",
         "What is the average salary of a nurse per year?");
    VETO("Convert 10 miles to kilometers.", "Convert 10 miles per hour to kilometers per hour.",
         "hour");
    VETO("What is the GDP of Germany?", "What is the GDP per capita of Germany?", "capita");
}

Test(guard, added_clauses_formats_and_measures)
{
    VETO("How much does a streaming subscription cost?",
         "How much did a streaming subscription cost when it launched?", "launched");
    VETO("Summarize the plot of Macbeth.", "Summarize the plot of Macbeth in one sentence.",
         "sentence");
    VETO("How many meters are in a mile?", "How many meters are in a nautical mile?",
         "nautical");
    VETO("Is chocolate healthy?", "Is dark chocolate healthy?", "dark");
    VETO("How do I delete the first line of a file?",
         "How do I delete the first and last lines of a file?", "last");
    PASS("How much sleep does a teenager need?",
         "How many hours of sleep does a teenager need?");
    /* "word" frames a question ("the word ubiquitous") but measures an answer after "in" */
    VETO("What is the capital of France?", "What is the capital of France in one word?",
         "word");
    VETO("What is the capital of France?", "What is the capital of France? Answer in one word.",
         "word");
    PASS("What does the word ubiquitous mean?", "What does ubiquitous mean?");
}

/* An added manner, order or case sets the task apart; most adverbs in -ly do not */
Test(guard, added_manner_order_and_case)
{
    VETO("How do I center a div in CSS?", "How do I center a div vertically in CSS?",
         "vertically");
    VETO("How do I sort a list in Python?", "How do I sort a list alphabetically in Python?",
         "alphabetically");
    VETO("How do I sort a list in Python?",
         "How do I sort a list in descending order in Python?", "descending");
    VETO("What is the time complexity of quicksort?",
         "What is the worst-case time complexity of quicksort?", "worst");
    VETO("What is the time complexity of quicksort?",
         "What is the average time complexity of quicksort?", "average");
    VETO("How do I traverse a binary tree?", "How do I traverse a binary tree recursively?",
         "recursively");
    VETO("How do I compare two strings in JavaScript?",
         "How do I compare two strings case-insensitively in JavaScript?", NULL);
    PASS("How do I quickly boil an egg?", "How do I boil an egg?");
    PASS("How do I sort a list in Python?", "How can I sort a Python list?");
}

/* A comparison flipped by "less", and "why" against a "how" of amount, way or reasons */
Test(guard, less_against_a_comparative_and_why_against_how)
{
    VETO("Which is healthier, brown rice or white rice?",
         "Which is less healthy, brown rice or white rice?", "less healthy");
    VETO("Is a train safer than a car?", "Is a train less safe than a car?", "less safe");
    PASS("Which is healthier, brown rice or white rice?",
         "Which is more healthy, brown rice or white rice?");
    VETO("How many people live in Tokyo?", "Why do so many people live in Tokyo?", "why");
    VETO("How do I use async/await in JavaScript?",
         "Why should I use async/await in JavaScript?", "why");
    VETO("How can I learn Rust?", "Why would I learn Rust?", "why");
    PASS("How do I get hiccups?", "Why do I get hiccups?");
    PASS("How come the sky is blue?", "Why is the sky blue?");
    /* a measure of the thing against a count of something else, not of its units */
    VETO("How tall is the Eiffel Tower?", "How many levels does the Eiffel Tower have?",
         "how tall vs how many");
    VETO("How big is Tokyo?", "How many people live in Tokyo?", "how big vs how many");
    PASS("How tall is he?", "How many feet tall is he?");
    PASS("How big is Texas?", "How many square miles is Texas?");
    PASS("How far is the moon?", "How many miles away is the moon?");
}

/* "one" after an ordinal is a pronoun; a past form's opposite is one beside another change */
Test(guard, ordinals_with_one_and_past_opposites)
{
    PASS("I'll take the second one.", "I'll take the second.");
    PASS("I'll take the 3rd one.", "I'll take the third one.");
    VETO("I'll take the second one.", "I'll take the third.", "numbers differ");
    VETO("I'll take the 3rd one.", "I'll take the second one.", "numbers differ");
    VETO("Who won the 2018 FIFA World Cup?", "Who lost the 2018 FIFA World Cup final?",
         "won vs lost");
    /* WWII, WW1: World War II and I */
    PASS("When did World War II end?", "What year did WWII come to an end?");
    PASS("What caused World War I?", "What caused WW1?");
    VETO("When did World War I end?", "When did WWII end?", "numbers differ");
}

Test(guard, one_or_all_of_a_plural)
{
    VETO("How do I delete a branch in git?", "How do I delete all branches in git?", "scope");
    VETO("How do I restart a Docker container?", "How do I restart all Docker containers?",
         "scope");
    PASS("How do I list all files in a folder?", "How do I list the files in a folder?");
    PASS("How do I make all columns the same width in Excel?",
         "How do I make Excel column widths equal?");
}

Test(guard, names_and_nouns_trading_places)
{
    VETO("What is the population of Slovenia?", "What is the population of Slovakia?", NULL);
    VETO("What is the capital of Australia?", "What is the capital of Austria?", NULL);
    PASS("What language is spoken in Austria?", "What language do Austrians speak?");
    VETO("Is a square a rectangle?", "Is a rectangle a square?", "order");
    VETO("How much should I feed my dog?", "How much should I feed my puppy?", NULL);
}

Test(guard, added_times_and_roles)
{
    VETO("Why is the sky blue?", "Why is the sky blue at night?", "night");
    VETO("Who is the president of France?", "Who is the next president of France?", "next");
    VETO("Who was the prime minister of Italy?", "Who was the former prime minister of Italy?",
         "former");
    PASS("When is the best time to prune roses?", "What time of year should roses be pruned?");
}

Test(guard, operations_on_a_number)
{
    VETO("What is the square root of 16?", "What is the square of 16?", "root");
    VETO("What is the cube root of 27?", "What is the cube of 27?", "root");
    VETO("What is the natural log of 10?", "What is the log of 10?", "natural");
    VETO("What is the factorial of 5?", "What is 5 squared?", "operation");
    VETO("What is 255 in binary?", "What is 255 in hexadecimal?", NULL);
    PASS("What is the square root of 16?", "what's the square root of 16");
    PASS("What is the square root of 144?", "sqrt of 144?");
    PASS("What is 5 squared?", "What is the square of 5?");
    PASS("What is the log of 100?", "What is the logarithm of 100?");
    PASS("What is 10% of 50?", "What is 10 percent of 50?");
    PASS("What is 2 to the power of 10?", "What is 2^10?");
    PASS("What is the natural log of 10?", "what's the natural logarithm of 10");
    /* no number: the words are not operations on one */
    PASS("What is the root cause of inflation?", "What is the root cause of inflation today?");
}

Test(guard, code_and_arithmetic)
{
    VETO("What does print(2+3) output in Python?", "What does print(2*3) output in Python?",
         "operators");
    VETO("Is a == b true when a = 1 and b = 1.0 in JS?",
         "Is a === b true when a = 1 and b = 1.0 in JS?", "operators");
    VETO("What is 7 / 2 in Python 3?", "What is 7 // 2 in Python 3?", "operators");
    VETO("What is 2 ** 10 in Python?", "What is 2 ^ 10 in Python?", "operators");
    /* a return moved into the if: the words are the same, the program is not */
    VETO("What does f(False) return?\n\ndef f(x):\n    if x:\n        print(1)\n    return 2",
         "What does f(False) return?\n\ndef f(x):\n    if x:\n        print(1)\n        return 2",
         "indentation");
    PASS("What does print(2+3) output in Python?", "what does print(2+3) output in python");
    PASS("What is 2+3?", "What's 2 + 3?");
    /* another indentation style, the same structure */
    PASS("What does this print?\nfor i in range(3):\n  print(i)",
         "What will this print?\nfor i in range(3):\n    print(i)");
    /* hyphenated words and a one-sided sign are not code */
    PASS("What is a well-known e-mail client?", "What is a well known email client?");
}

Test(guard, who_acts_and_who_is_acted_on)
{
    VETO("Who killed Julius Caesar?", "Who did Julius Caesar kill?", "roles");
    VETO("What do owls eat?", "What eats owls?", "roles");
    VETO("Who did Apple sue in 2011?", "Who sued Apple in 2011?", NULL);
    VETO("Does my employer pay for health insurance?",
         "Does my employee pay for health insurance?", NULL);
    VETO("How many US dollars is 100 euros?", "How many euros is 100 US dollars?", "order");
    VETO("How many dollars is 100 euros?", "How many euros is 100 US dollars?", "order");
    VETO("How many yen is one British pound?", "How many British pounds is one yen?", "order");
    VETO("How many ounces are in one cup?", "How many cups are in one ounce?", "order");
    VETO("How do I turn a dict into a tuple?", "How do I turn a tuple into a dict?", "order");
    VETO("Convert a list to a set in Python", "Convert a set to a list in Python", "order");
    /* irregular verbs: "taught" is a form of "teach" */
    VETO("Who did Socrates teach?", "Who taught Socrates?", "roles");
    VETO("Who did the Yankees lose to?", "Who lost to the Yankees?", "roles");
    PASS("Who killed Julius Caesar?", "Who was it that killed Julius Caesar?");
    PASS("What do owls eat?", "What do owls usually eat?");
    /* a participle alone is also an adjective: alike to the past only */
    VETO("Is it illegal to be drunk in public?", "Is it illegal to drink in public?", "drunk");
    VETO("How do I fix a broken zipper?", "How do I fix a break zipper?", "broken");
    VETO("Can you eat frozen fish raw?", "Can you freeze fish raw?", NULL);
}

Test(guard, a_way_against_an_amount_or_a_time_frame)
{
    VETO("How do I cook salmon in the oven?", "How long do I cook salmon in the oven?", "how");
    VETO("How do I feed a goldfish?", "How much do I feed a goldfish?", "how");
    VETO("How can I learn guitar?", "How can I learn guitar in one month?", "month");
    PASS("How long do I cook salmon in the oven?", "How long should salmon cook in the oven?");
    PASS("How much protein should I eat?", "How much protein should I eat in a day?");
    /* two measures of one thing */
    VETO("How deep is the Mariana Trench?", "How wide is the Mariana Trench?", "how deep");
    VETO("How wide is the opening of the Panama Canal?", "How long is the Panama Canal?",
         "how wide");
    VETO("How heavy is an African elephant?", "How tall is an African elephant?", "how");
    VETO("How much sugar is in a banana?", "How many carbs are in a banana?", NULL);
    PASS("How big is an African elephant?", "How large is an African elephant?");
    PASS("How high is Kilimanjaro?", "How tall is Kilimanjaro?");
    PASS("How much should I put in a rainy-day fund?", "How big should a rainy-day fund be?");
}

Test(guard, spellings_of_one_thing)
{
    PASS("What's a normal resting heart rate for children?",
         "What's a normal resting heart rate for kids?");
    PASS("How do I unclog a drain without chemicals?",
         "What's a chemical-free way to unclog a drain?");
    PASS("When did World War I end?", "When did World War 1 end?");
    PASS("How many people live in Tokyo?", "How many folks live in Tokyo?");
    PASS("What happened after the war I read about?",
         "What happened after the war that I read about?");
    VETO("When did World War II end?", "When did World War I end?", "numbers");
    PASS("When was the cathedral finished?", "When was the cathedral completed?");
    PASS("How many lbs is 20 kg?", "How many pounds is 20 kilograms?");
    PASS("What is 40 degrees Celsius in Fahrenheit?", "What is 40 °C in °F?");
    VETO("What is 40 degrees Celsius in Fahrenheit?", "What is 40 °F in °C?", "order");
    VETO("What is 40 degrees Celsius in Fahrenheit?",
         "What is 40 degrees Fahrenheit in Celsius?", "order");
    PASS("Is a non-stick pan safe?", "Is a nonstick pan safe?");
}

Test(guard, a_prefix_that_makes_another_word)
{
    VETO("Who is the step-father of Hamlet?", "Who is the father of Hamlet?", "stepfather");
    VETO("What did the co-founder of Microsoft do?", "What did the founder of Microsoft do?",
         NULL);
    VETO("Is my ex-husband allowed to see the kids?", "Is my husband allowed to see the kids?",
         NULL);
    VETO("Where was my great-grandmother born?", "Where was my grandmother born?", NULL);
    VETO("Is aspirin an anti-coagulant?", "Is aspirin a coagulant?", NULL);
    PASS("Who was the vice-president under Obama?", "Who was the vice president under Obama?");
    PASS("How do I become a co-owner?", "How do I become a coowner?");
    VETO("Do I have to invite my sister-in-law?", "Do I have to invite my sister?", NULL);
}

Test(guard, countries_and_every_other)
{
    VETO("what is the national dish of austria", "what is the national dish of australia",
         "austria");
    VETO("do i need a visa for peru", "do i need a visa for chile", NULL);
    VETO("Should I take vitamin D every day?", "Should I take vitamin D every other day?",
         "every other");
    PASS("Should I take vitamin D every day?", "Should I take vitamin D each and every day?");
}

Test(guard, a_word_that_looks_like_a_plural_of_another)
{
    VETO("Is HTTPS secure?", "Is HTTP secure?", NULL);
    VETO("What is the default port for HTTPS?", "What is the default port for HTTP?", NULL);
    PASS("How do I delete rows in Excel?", "How to delete a row in Excel");
}

/* A capital A after a noun names a letter; a keyword before "loop" or "statement" is the
 * thing asked about; "of a single file" narrows. */
Test(guard, letters_keywords_and_one_of_a_kind)
{
    VETO("Can blood type B donate to blood type A?", "Can blood type A donate to blood type B?",
         NULL);
    VETO("Which fruits have vitamin A?", "Which fruits have vitamin E?", NULL);
    PASS("Which fruits have vitamin A?", "What fruits contain vitamin A?");
    PASS("Is It Hard To Find A Job In Berlin?", "is it hard to find a job in Berlin");
    VETO("How do I write a for loop in Rust?", "How do I write a while loop in Rust?", "while");
    VETO("When should I use a with statement?", "When should I use an if statement?", NULL);
    PASS("How do I write a for loop in Rust?", "How do you write a Rust for loop?");
    VETO("How do I undo the last commit in git?",
         "How do I undo the last commit of a single file in git?", "file");
    PASS("How do I remove a row in SQL?", "How do I remove a single row in SQL?");
}

/* A future against a past, a capital against the largest city, contractions typed without
 * their apostrophe, a place or way a task is done in, a number marked otherwise. */
Test(guard, futures_places_and_marked_numbers)
{
    VETO("Who will win the World Series?", "Who won the World Series?", "will");
    VETO("How will inflation affect my savings?", "How has inflation affected my savings?",
         "will");
    VETO("When will the next leap year be?", "When was the last leap year?", NULL);
    PASS("What will happen if I skip a dose?", "What happens if I skipped a dose?");
    PASS("Will it snow in Denver tomorrow?", "Is it going to snow in Denver tomorrow?");
    VETO("What is the capital of Ohio?", "What is the largest city in Ohio?", "capital");
    VETO("Was Mozart born in Vienna?", "did mozart die in vienna", "born");
    VETO("How do I boot my Mac into recovery mode?", "how do i exit recovery mode on my mac",
         "boot");
    PASS("How do I rotate a PDF?", "quick question: how do i rotate a pdf");
    PASS("What is the capital of Ohio?", "What's Ohio's capital city?");
    PASS("Why doesn't my printer work?", "why doesnt my printer work");
    PASS("Why won't my laptop turn on?", "why wont my laptop turn on");
    VETO("Why does my printer work?", "why doesnt my printer work", NULL);
    VETO("How do I renew my passport?", "How do I renew my passport online?", "online");
    VETO("How do I grow basil?", "How do I grow basil indoors?", "indoors");
    VETO("How do I whiten my teeth?", "How do I whiten my teeth at home?", "home");
    VETO("How do I roast potatoes?", "How do I roast potatoes in the oven?", "oven");
    VETO("How can I lower my blood pressure?", "How can I lower my blood pressure naturally?",
         "naturally");
    VETO("How do I learn to swim?", "How do I learn to swim as a senior?", "senior");
    PASS("Explain photosynthesis in simple terms.",
         "Can you give me a simple explanation of photosynthesis?");
    VETO("Is 30°C hot?", "Is 30°F hot?", "celsius");
    VETO("What time is 5pm GMT in Tokyo?", "What time is 5am GMT in Tokyo?", NULL);
    VETO("Is the BMW X3 reliable?", "Is the BMW M3 reliable?", NULL);
    VETO("Is $20 a good tip?", "Is €20 a good tip?", NULL);
    PASS("How much is $20 in euros?", "how much is 20 dollars in euros");
    VETO("How do I join two strings in Python 2?", "How do I join two strings in Python?", "2");
    PASS("How do I turn on 2FA?", "How do I enable two-factor authentication?");
}

/* A yes or no against an amount, a way or a reason; the asker acting against the asker
 * acted on; the same words with one or two inserted. */
Test(guard, yes_or_no_roles_and_inserted_words)
{
    VETO("Can rabbits eat carrots?", "How many carrots can rabbits eat?", "question differs");
    VETO("Should I consolidate my loans?", "How do I consolidate my loans?", "question differs");
    VETO("Will rents go up?", "Why did rents go up?", NULL);
    PASS("Can you explain how tides work?", "How do tides work?");
    PASS("Is there a way to rename a branch in git?", "How do I rename a branch in git?");
    PASS("Is Lisbon expensive to visit?", "How pricey is a trip to Lisbon?");
    VETO("Can I sue my landlord?", "Can my landlord sue me?", "roles");
    VETO("What should I tell my lawyer?", "What will my lawyer tell me?", NULL);
    PASS("How much fiber should I eat per day?",
         "What's the recommended daily fiber intake for me?");
    VETO("How do I clean a suede jacket?", "How do I clean a jacket?", "suede");
    VETO("How long does brown rice keep in the fridge?", "How long does rice keep in the fridge?",
         "brown");
    VETO("Best tacos in Austin", "Best tacos in Austin that deliver", "deliver");
    PASS("What is the plural of \"octopus\"?", "what is the plural form of octopus");
    PASS("Quick question: what is the Monty Hall problem?", "What is the Monty Hall problem?");
    PASS("What is a Roth 401k?", "What is a Roth 401k retirement account?");
    PASS("What is 20% of 150?", "what's 20 percent of 150");
    PASS("How do I stop hiccups?", "How do I stop hiccups fast?");
}

/* British and American spellings, a slip of one letter in a long word, the United States
 * as the US. */
Test(guard, spellings_slips_and_the_us)
{
    PASS("How do I organize my closet?", "How do I organise my closet?");
    PASS("What is the best fertilizer for roses?", "What is the best fertiliser for roses?");
    PASS("Where should I go travelling in May?", "Where should I go traveling in May?");
    PASS("How often should I rotate my tires?", "How often should I rotate my tyres?");
    PASS("What causes migraines in teenagers?", "What causes migranes in teenagers?");
    PASS("What are the symptoms of anemia?", "What are the symtoms of anemia?");
    VETO("What is the difference between a desert and a dessert?",
         "What is the difference between a desert and a forest?", NULL);
    PASS("What is the minimum wage in the United States?", "What is the minimum wage in the US?");
    PASS("How do I renew my UK passport?", "How do I renew my British passport?");
    VETO("What is the largest state in the US?", "What is the largest state?", "us");
    VETO("How do I get a visa for the United States?",
         "How do I get a visa for the United Kingdom?", NULL);
    PASS("Can you help us plan a trip?", "Can you help plan a trip?");
}

/* Without a thing against with it, another question word before the same words, and the
 * same doer first in the active and in the passive. */
Test(guard, free_of_another_question_word_and_the_passive)
{
    VETO("How do I make pasta with eggs?", "How do I make egg-free pasta?", "negation");
    VETO("Which teas have caffeine?", "Which teas are caffeine-free?", "negation");
    PASS("How do I make egg-free pasta?", "How do I make pasta without eggs?");
    PASS("How do I get free shipping on eBay?", "How do I get shipping on eBay for free?");
    VETO("How do I bake a cake with flour?", "How do I bake a flourless cake?", "flourless");
    PASS("How do I bake a flourless cake?", "How do I bake a cake without flour?");
    VETO("What is the Golden Gate Bridge?", "Where is the Golden Gate Bridge?", "where");
    VETO("What do owls hunt?", "How do owls hunt?", "how");
    VETO("Why do dogs pant?", "How do dogs pant?", NULL);
    VETO("What is Diwali?", "When is Diwali?", NULL);
    PASS("What time does the museum open?", "When does the museum open?");
    PASS("What year did the Cold War end?", "When did the Cold War end?");
    VETO("Did Rome conquer Carthage?", "Was Rome conquered by Carthage?", "roles");
    PASS("Did Rome conquer Carthage?", "Was Carthage conquered by Rome?");
    PASS("What protocol does SSH use?", "Which protocol is used by SSH?");
}

/* A phrase of method, rate or place inserted, "used to" and "going to" against another
 * time, leave against duty against advice, and everyday spellings of one word. */
Test(guard, inserted_phrases_times_modals_and_everyday_spellings)
{
    VETO("How do I make pizza dough?", "How do I make pizza dough from scratch?", "scratch");
    VETO("How do I buy rice?", "How do I buy rice in bulk?", "bulk");
    VETO("How do I fix a leaky tap?", "How do I fix a leaky tap myself?", "myself");
    VETO("How do I cook eggs?", "How do I cook eggs in a microwave?", "microwave");
    VETO("What used to be the capital of Japan?", "What is the capital of Japan?", "used to");
    VETO("Who won the Ballon d'Or?", "Who is going to win the Ballon d'Or?", "going to");
    VETO("Who has won the most Grammys?", "Who is expected to win the most Grammys?", NULL);
    VETO("Should I tell HR about my diagnosis?", "Do I have to tell HR about my diagnosis?",
         "should");
    VETO("Can I bring a knife on a plane?", "Must I declare a knife on a plane?", NULL);
    PASS("How often should I water my ferns?", "how often do i need to water my ferns");
    PASS("Can you explain recursion?", "Could you explain recursion?");
    PASS("How do I prevent rust on my bike?", "How do I stop rust on my bike?");
    PASS("How do I connect my speaker?", "how do u connect ur speaker");
    PASS("What should I buy my mom for her birthday?",
         "What should I buy my mother for her birthday?");
    PASS("How tall is Mount Fuji?", "How tall is Mt Fuji?");
    PASS("Write a limerick about spring.", "Compose a limerick about the spring season.");
    VETO("Who used to run Tesla?", "Who runs Tesla?", "used to");
    VETO("Did Spain beat Italy?", "Was Spain beaten by Italy?", "roles");
    VETO("Which juices have sugar in them?", "Which juices are sugar free?", "negation");
    VETO("How do I wash silk?", "How do I wash silk by hand?", "hand");
    VETO("How do I sell my boat?", "How do I sell my boat privately?", "privately");
    PASS("How do I check free memory on Linux?", "linux command to see how much memory is free");
    PASS("How do I exit nano?", "How do I quit the nano editor?");
}

/* The close call's verdict both ways round, after the guard's own has passed. */
static void close_call(const char *a, const char *b, int ok, const char *word)
{
    char why[128];
    cr_expect_eq(check(a, b, why, sizeof why), 1, "\"%s\" vs \"%s\": the guard vetoes (%s)", a,
                 b, why);
    for (int pass = 0; pass < 2; pass++) {
        const char *x = pass ? b : a, *y = pass ? a : b;
        int r = gw_guard_close_call(x, strlen(x), y, strlen(y), why, sizeof why);
        cr_expect_eq(r, ok, "close call \"%s\" vs \"%s\": got %d (%s), want %d", x, y, r, why,
                     ok);
        if (!r && word)
            cr_expect(strstr(why, word) != NULL, "\"%s\" vs \"%s\": reason \"%s\" lacks \"%s\"",
                      x, y, why, word);
        if (r)
            cr_expect_str_eq(why, "");
    }
}

/* Below guard_strict_below, one side that says all the other does and more, a question
 * word of its own, or other units are another question; rewordings are not. */
Test(guard, close_calls)
{
    close_call("How do I bake bread?", "What is the way to bake sourdough bread?", 0,
               "sourdough");
    close_call("How do I clone a repository?", "what's the way to clone a forked repository", 0,
               "forked");
    close_call("Where do koalas live?", "What do koalas eat?", 0, "where");
    VETO("Who founded Wikipedia?", "What is Wikipedia funded by?", "who");
    /* (units each side names and the other does not: the guard's at any similarity) */
    VETO("What is the speed of sound in km/h?", "What is the speed of sound in miles per hour?",
         "units differ");
    PASS("How many km is 5 miles?", "5 miles in kilometers");
    /* rewordings: few words shared, request phrasing added, a why asked as a what */
    close_call("How do I thaw frozen shrimp fast?", "what's the quickest way to defrost shrimp",
               1, NULL);
    close_call("How do I check my Python version?",
               "I was wondering, what command shows which Python I have?", 1, NULL);
    close_call("Walk me through changing a bike tire.", "How do I change a bicycle tyre?", 1,
               NULL);
    close_call("Why do cats purr?", "What makes a cat purr?", 1, NULL);
    close_call("How can I tell when a mango is ripe?", "How do I know if a mango is ripe?", 1,
               NULL);
    char why[64];
    cr_expect_eq(gw_guard_close_call(NULL, 0, NULL, 0, why, sizeof why), 1);
}

/* A name one side abbreviates and the other spells out is one name, to the guard and to the
 * close calls; "what's the best time to" asks a when. */
Test(guard, abbreviations_and_what_time)
{
    PASS("Is it safe to walk around LA at night?", "Is it safe to walk around Los Angeles at night?");
    PASS("Where can I get cheap tacos in San Diego?", "Where can I get cheap tacos in SD?");
    PASS("What is the tallest building in NYC?", "What is the tallest building in New York City?");
    PASS("Does coffee raise your BP?", "Does coffee raise your blood pressure?");
    PASS("How much does the WHO spend on vaccines?",
         "How much does the World Health Organization spend on vaccines?");
    VETO("What is the best museum in LA?", "What is the best museum in New York?", NULL);
    VETO("Can I work in the EU with a US passport?",
         "Can I work in the European Union with a Canadian passport?", NULL);
    PASS("Is the UK part of the EU?", "Is the UK a part of the European Union?");
    close_call("How hot does it get in LA in summer?",
               "How hot does it get in Los Angeles in summer?", 1, NULL);
    VETO("Where should I eat in NYC?", "Where should I eat brunch in New York City?", "brunch");
    PASS("What's the best time to visit Iceland?", "When is the best time to visit Iceland?");
    close_call("What is the best time of day to water tomatoes?",
               "When should I water tomatoes?", 1, NULL);
    VETO("What is the time difference between Tokyo and Sydney?",
         "When is the time difference between Tokyo and Sydney?", "question");
}

/* "how long" and "how many hours", "why" and "what's the reason", "when" and "what age" ask
 * the same; "whats" is "what's"; "first" as an adverb counts nothing. */
Test(guard, same_asking_in_other_words)
{
    PASS("How long does a tattoo take to heal?", "How many weeks does a tattoo take to heal?");
    PASS("How long did the Roman Empire last?", "how many years did the roman empire last");
    VETO("How long does a tattoo take to heal?", "How much does a tattoo cost to heal?", NULL);
    PASS("Why do onions make you cry?", "whats the reason onions make you cry");
    PASS("Why is the sky blue?", "What's the reason the sky is blue?");
    VETO("Why is the sky blue?", "Where is the sky blue?", NULL);
    PASS("When should a baby start crawling?", "At what age should a baby start crawling?");
    PASS("When can kids sit in the front seat?", "what age can kids sit in the front seat");
    PASS("When was the Colosseum built?", "what years was the colosseum constructed");
    PASS("What is the population of Chile?", "whats the population of chile");
    PASS("How is the economy in Brazil?", "hows the economy in brazil");
    VETO("whos the mayor of Chicago", "who was the mayor of Chicago", "tense");
    PASS("Can I drink coffee on an empty stomach?", "can i drink coffee before eating anything first");
    PASS("Which came first, the chicken or the egg?", "so which came first the chicken or egg");
    VETO("Who was the first person on the moon?", "Who was the second person on the moon?",
         "numbers");
    VETO("Who finished first in the Boston Marathon?",
         "Who finished second in the Boston Marathon?", "numbers");
    VETO("How do I buy my first home?", "How do I buy a home?", "numbers");
}

/* From and to turned round, two things asked of one word, a function word quoted alone,
 * a few more opposites, "1 banana" as "a banana", "la" typed for "Los Angeles". */
Test(guard, direction_word_aspects_and_quoted_words)
{
    VETO("How do I move files from my laptop to an external drive?",
         "How do I move files from an external drive into my laptop?", "laptop");
    VETO("Can I send money from Venmo to my bank account?",
         "Can I send money to Venmo from my bank account?", "direction");
    VETO("Does the tenant pay the deposit to the landlord?",
         "Does the tenant get the deposit back from the landlord?", NULL);
    PASS("How far is Boston from New York?", "How far is it from New York to Boston?");
    PASS("How do I stop my cat from scratching the sofa?",
         "how do i get my cat to stop scratching the sofa");
    PASS("How do I remove a watermark from a PDF?", "how to remove the watermark of a pdf");
    VETO("What does 'schadenfreude' mean?", "Where does the word 'schadenfreude' come from?",
         "meaning vs origin");
    VETO("What is the meaning of 'benevolent'?", "What is the opposite of 'benevolent'?",
         "meaning vs opposite");
    PASS("What does 'benevolent' mean?", "What's the definition of benevolent?");
    VETO("When do I use 'its' versus 'it's'?", "When do I use 'its' versus 'their'?", "their");
    VETO("Should I write 'a' or 'an' before 'hour'?", "Should I write 'a' or 'the' before 'hour'?",
         NULL);
    VETO("How do I thicken gravy?", "How do I thin gravy that is too thick?", "opposites");
    VETO("How do I delete my Facebook account?", "How do I deactivate my Facebook account?",
         "opposites");
    PASS("How much protein is in an egg?", "protein in 1 egg");
    VETO("How much protein is in an egg?", "protein in 3 eggs", "numbers");
    PASS("Is San Diego expensive to live in?", "is sd expensive to live in");
}

/* A why asked as "what caused", "where can I track" as a how-to, "uninstall" said as
 * "remove an installed", "find out" as no direction; the symptoms, causes and treatment of
 * one illness are three questions, and washing and drying a sweater two. */
Test(guard, why_as_a_cause_and_aspects_of_an_illness)
{
    PASS("Why did the Hindenburg explode?", "what caused the hindenburg to explode");
    close_call("Why did the Hindenburg explode?", "what caused the hindenburg to explode", 1,
               NULL);
    close_call("How do I check my passport application status?",
               "Where can I track my passport application?", 1, NULL);
    close_call("Where is the passport office?", "How do I check my passport application?", 0,
               "where");
    PASS("How do I uninstall Spotify on a Mac?", "mac: how to remove the installed spotify app");
    VETO("How do I uninstall Spotify on a Mac?", "How do I install Spotify on a Mac?",
         "opposites");
    PASS("How can I find out what router I have?", "which router is in my house");
    VETO("How do I log out of Slack?", "How do I log in to Slack?", "opposites");
    VETO("What are the symptoms of shingles?", "What causes shingles?", "opposites");
    VETO("What causes shingles?", "What is the treatment for shingles?", "opposites");
    PASS("What are the symptoms of shingles?", "What are the signs and symptoms of shingles?");
    VETO("How do I wash a down jacket?", "How do I dry a down jacket?", "opposites");
    VETO("How do I remove blank rows in Excel?", "How do I count blank rows in Excel?",
         "opposites");
    PASS("Who was the first president of the United States?", "first US president?");
}

/* The same content words in other forms (slips, abbreviations, British spelling), the same
 * question word and the same persons: what the cache serves under its threshold. */
Test(guard, the_same_words)
{
    static const char *const same[][2] = {
        {"How do I restart a service in Linux?", "how do i restart a servcie on linux"},
        {"What is the capital of the UK?", "What is the capital of the United Kingdom?"},
        {"Which colours go with grey?", "Which colors go with gray?"},
        {"Can you check my essay?", "can u check my essay"},
    };
    static const char *const other[][2] = {
        {"How do I restart a service in Linux?", "How do I stop a service in Linux?"},
        {"How do I mute someone on Slack?", "how do i know if someone muted me on slack"},
        {"How do I restart a service in Linux?", "Why do I restart a service in Linux?"},
        {"How do I restart a service in Linux?", "How do I restart a service in Linux quickly?"},
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        cr_expect(gw_guard_same_words(same[i][0], strlen(same[i][0]), same[i][1],
                                      strlen(same[i][1])),
                  "\"%s\" vs \"%s\"", same[i][0], same[i][1]);
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        cr_expect(!gw_guard_same_words(other[i][0], strlen(other[i][0]), other[i][1],
                                       strlen(other[i][1])),
                  "\"%s\" vs \"%s\"", other[i][0], other[i][1]);
}

/* Opposites both negated, check-in vs check-out, a time counted back or ahead, within vs
 * after, and "between" two other things. */
Test(guard, negated_opposites_time_ahead_and_between)
{
    VETO("Why won't my car start?", "Why won't my car stop?", "opposites");
    VETO("What time is check-in at the Hilton?", "What time is check-out at the Hilton?",
         "opposites");
    VETO("Can I cancel my order within 24 hours?", "Can I cancel my order after 24 hours?",
         "opposites");
    VETO("Can I get a refund if I bought it 2 weeks ago?",
         "Can I get a refund if I buy it in 2 weeks?", NULL);
    VETO("Is my licence valid if it expires in 2 months?",
         "Is my licence valid if it expired 2 months ago?", "time differs");
    VETO("How do I earn points on flights?", "How do I use points on flights?", "opposites");
    VETO("What is the difference between mitosis and meiosis?",
         "What is the difference between meiosis and fertilization?", "compares other things");
    PASS("What is the difference between mitosis and meiosis?",
         "difference between meiosis vs mitosis");
    PASS("How do I find the average between two numbers?",
         "how to find the average between two values");
    PASS("How can I find out which version of Python I have?",
         "how do i check which python version is on my laptop");
}

Test(guard, empty_and_null)
{
    char why[64];
    cr_expect_eq(gw_guard_compatible("", 0, "", 0, why, sizeof why), 1);
    cr_expect_eq(gw_guard_compatible(NULL, 0, NULL, 0, NULL, 0), 1);
    cr_expect_eq(gw_guard_compatible("?!", 2, "...", 3, why, sizeof why), 1);
    /* an empty question next to a real one: nothing contradicts, the embedding decides */
    cr_expect_eq(gw_guard_compatible("", 0, "What is 5 + 5?", 14, why, sizeof why), 0);
    cr_expect_str_eq(why, "numbers differ: none vs 5");
    /* why: a tiny buffer is still terminated, whylen 0 is never written */
    char small[6] = "xxxxx";
    cr_expect_eq(check("What is 5 + 5?", "What is 5 + 6?", small, sizeof small), 0);
    cr_expect_eq(small[5], 0);
    char untouched = 'x';
    cr_expect_eq(gw_guard_compatible("a 1", 3, "a 2", 3, &untouched, 0), 0);
    cr_expect_eq(untouched, 'x');
}

Test(guard, lengths_bound_the_input)
{
    /* only the first slen bytes count: "... 15" cut to "... 1" */
    const char *a = "What is 15% of 200?";
    const char *b = "What is 1";
    cr_expect_eq(gw_guard_compatible(a, 9, b, strlen(b), NULL, 0), 1);
    /* text that is not NUL-terminated, in an exact-size heap block (ASan sees overreads) */
    const char *src = "Why is the sky blue";
    size_t n = strlen(src);
    char *heap = malloc(n);
    memcpy(heap, src, n);
    cr_expect_eq(gw_guard_compatible(heap, n, "why is the sky blue?", 20, NULL, 0), 1);
    free(heap);
}

Test(guard, non_ascii)
{
    PASS("Wie heißt die Hauptstadt von Österreich?", "wie heißt die Hauptstadt von Österreich");
    VETO("Qu'est-ce que la Tour Eiffel à Paris?", "Qu'est-ce que la Tour Eiffel à Lyon?", NULL);
    PASS("What does “serendipity” mean?", "What does \"serendipity\" mean?");
    PASS("What’s France’s national dish?", "What is the national dish of France?");
    PASS("日本の首都はどこですか", "日本の首都はどこですか？");
    VETO("How far is Zürich from Genève?", "How far is Zürich from Bern?", NULL);
    PASS("Tell me about Curaçao — the island", "Tell me about Curaçao, the island.");
    /* broken UTF-8 and stray continuation bytes must not crash */
    const char bad[] = {'\xE2', '\x80', 'a',    '\xC3', ' ',   '\xFF',
                        '\xE2', '\x80', '\x99', 's',    '\xE2'};
    char why[64];
    gw_guard_compatible(bad, sizeof bad, bad, sizeof bad - 1, why, sizeof why);
    cr_expect_eq(gw_guard_compatible(bad, sizeof bad, bad, sizeof bad, why, sizeof why), 1);
}

Test(guard, random_bytes_do_not_crash)
{
    uint32_t x = 12345;
    char why[96];
    for (int round = 0; round < 3000; round++) {
        size_t la = 0, lb = 0;
        x = x * 1664525u + 1013904223u;
        la = (x >> 8) % 300;
        x = x * 1664525u + 1013904223u;
        lb = (x >> 8) % 300;
        char *a = malloc(la ? la : 1), *b = malloc(lb ? lb : 1);
        static const char alphabet[] = "aZ 0'.,-_\"`#+(?!\n\xE2\x80\x99\xC3\xA9\xFF";
        for (size_t i = 0; i < la; i++) {
            x = x * 1664525u + 1013904223u;
            a[i] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
        }
        for (size_t i = 0; i < lb; i++) {
            x = x * 1664525u + 1013904223u;
            b[i] = round % 2 ? alphabet[(x >> 16) % (sizeof alphabet - 1)] : (char)(x >> 24);
        }
        int r = gw_guard_compatible(a, la, b, lb, why, sizeof why);
        cr_assert(r == 0 || r == 1);
        cr_assert(memchr(why, 0, sizeof why) != NULL);
        free(a);
        free(b);
    }
}

Test(guard, too_long_is_vetoed)
{
    size_t n = 20000;
    char *a = malloc(n);
    for (size_t i = 0; i < n; i++)
        a[i] = i % 5 == 4 ? ' ' : 'w';
    char why[64];
    cr_expect_eq(gw_guard_compatible(a, n, a, n, why, sizeof why), 0);
    cr_expect_str_eq(why, "too long to check");
    free(a);
}

Test(guard, cost_per_pair)
{
    const char *a = "How do I convert a string to an integer in Java without exceptions?";
    const char *b = "In Java, how can I turn a String into an int without an exception?";
    size_t la = strlen(a), lb = strlen(b);
    int n = 20000, ok = 0;
    struct timespec t0, t1;
    gw_guard_compatible(a, la, b, lb, NULL, 0); /* lexicon built */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++)
        ok += gw_guard_compatible(a, la, b, lb, NULL, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
    /* logged, not asserted: speed is the benchmark's to measure (the machine may be busy) */
    cr_log_info("guard: %.2f us per pair", us);
    cr_expect_eq(ok, n, "the same verdict every time");
}

/* The sentences in which a and b differ, when they share sentences around them; "" when
 * they are to be compared whole. */
static const char *core(const char *a, const char *b)
{
    static char out[512];
    struct gw_core c;
    if (!gw_guard_core(a, strlen(a), b, strlen(b), &c))
        return "";
    snprintf(out, sizeof out, "%.*s|%.*s", (int)c.an, c.a, (int)c.bn, c.b);
    gw_guard_core_free(&c);
    return out;
}

Test(guard, a_template_is_compared_by_its_question)
{
#define CTX "The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall. "
    /* retrieval-augmented prompts: the same context around another question, its label
     * shared */
    cr_assert_str_eq(core("Use the context.\n\n" CTX "\n\nQuestion: When was it completed?\n"
                          "Helpful Answer:",
                          "Use the context.\n\n" CTX "\n\nQuestion: Who designed it?\n"
                          "Helpful Answer:"),
                     "When was it completed?|Who designed it?");
    cr_assert_str_eq(core("Context:\n" CTX "\nQuery: How tall is it?\nAnswer: ",
                          "Context:\n" CTX "\nQuery: How high is it exactly?\nAnswer: "),
                     "How tall is it?|How high is it exactly?");
    /* the question first, the context after; a sentence that differs inside the context */
    cr_assert_str_eq(core("Explain this code:\nx = compute(a, b)\nprint(x)\nreturn x + 1\n",
                          "Optimize this code:\nx = compute(a, b)\nprint(x)\nreturn x + 1\n"),
                     "Explain this code:\n|Optimize this code:\n");
    cr_assert_str_eq(core(CTX "It is made of iron. Is it old?", CTX "It is made of steel. Is "
                                                                    "it old?"),
                     "It is made of iron.|It is made of steel.");
    /* compared whole: single questions, a short shared part, one text adding to the other,
     * the same text */
    cr_assert_str_eq(core("What is the capital of France?", "What's the capital of France?"),
                     "");
    cr_assert_str_eq(core("Hi. What is 2+2?", "Hi. What is 3+3?"), "");
    cr_assert_str_eq(core(CTX, CTX "Is it old?"), "");
    cr_assert_str_eq(core(CTX "Question: Who built it?\nAnswer:",
                          CTX "Question: Who built it? Thanks!\nAnswer:"),
                     "");
    cr_assert_str_eq(core(CTX "B.\nQuestion: Who built it?", CTX "X. B.\nQuestion: Who built "
                                                                  "it?"),
                     "");
    cr_assert_str_eq(core(CTX, CTX), "");
    cr_assert_str_eq(core("", ""), "");
    /* a fact changed in the context and the question after it: the paragraphs both
     * have between the two are left out */
    cr_assert_str_eq(core("Context: " CTX "The vote passed. " CTX CTX "\nQuestion: What was "
                          "the result of the vote?",
                          "Context: " CTX "The launch was postponed. " CTX CTX "\nQuestion: "
                          "What happened to the launch?"),
                     "The vote passed. Question: What was the result of the vote?|"
                     "The launch was postponed. Question: What happened to the launch?");
    /* words added inside a sentence of the context are compared in it ("no longer"); a
     * sentence added whole is not such a difference */
    cr_assert_str_eq(core(CTX "The bridge is open. " CTX "Write a short note about it.",
                          CTX "The bridge is no longer open. " CTX "Write a short note about it."),
                     "The bridge is open.|The bridge is no longer open.");
    /* numbers inside a sentence do not end it */
    cr_assert_str_eq(core(CTX "Pi is 3.14 and e is 2.71. What is pi?", CTX "Pi is 3.14 and e "
                                                                          "is 2.71. What is e?"),
                     "What is pi?|What is e?");
#undef CTX
}

/* "who did it" asked as the doer's noun: "who composed it" and "its composer"; a past
 * tense's base is the root of the noun ("won", "winner"); "wrote" is "author". */
Test(guard, the_doer_named_as_a_noun)
{
    PASS("Who wrote The Hobbit?", "author of the hobbit?");
    PASS("Who won the 2014 Tour de France?", "winner of the 2014 tour de france");
    PASS("Who composed the Moonlight Sonata?", "composer of the moonlight sonata");
    VETO("Who won the 2014 Tour de France?", "Who lost the 2014 Tour de France?", NULL);
    /* a past's base beginning another word is not its doer */
    VETO("When was the battle won?", "When was the battle window?", NULL);
    VETO("What stood at the town center?", "What standard is at the town center?", NULL);
    close_call("Who discovered radium?", "radium discoverer", 1, NULL);
    close_call("Who won the 2010 Masters?", "2010 masters winner", 1, NULL);
    close_call("Who directed Jaws?", "jaws director", 1, NULL);
    close_call("Who won the 2010 Masters?", "2010 masters runner up", 0, "who");
    close_call("Who wrote The Hobbit?", "what is the hobbit about", 0, NULL);
    VETO("Who founded Wikipedia?", "What is Wikipedia funded by?", "who");
}

/* The embedding reads no letter case: a word both sides quote, or give as code or as data
 * after a colon, in other case is another question; elsewhere case says nothing. */
Test(guard, letter_case_of_what_is_quoted)
{
    VETO("In Python, what does 'XYZ'.islower() return?",
         "In Python, what does 'xyz'.islower() return?", "case");
    VETO("Does \"Tom\" equal \"tom\" in SQL?", "Does \"Tom\" equal \"Tom\" in SQL?", "case");
    VETO("Make this title case: the old man and the sea",
         "Make this title case: The Old Man And The Sea", "case");
    VETO("Is this a valid Java class name: myWidget", "Is this a valid Java class name: MyWidget",
         "case");
    PASS("Who painted the Sistine Chapel ceiling?", "who painted the sistine chapel ceiling");
    PASS("What does the error 'Permission Denied' mean on Linux?",
         "linux says permission denied, what does it mean?");
    PASS("ruby: how do I reverse an array?", "How do I reverse an array in Ruby?");
    PASS("Quick question: How tall is Mount Fuji?", "quick question: how tall is mount fuji?");
    /* data capitalized as a sentence is, or not */
    PASS("Translate to Spanish: Good morning", "translate to spanish: good morning");
    PASS("Classify the sentiment: I love it", "classify the sentiment: i love it");
    PASS("Summarize: The talk ran long. It ended late.",
         "summarize: the talk ran long. it ended late.");
}

/* What two things share against what sets them apart, a time counted from against one
 * counted to, a kind of list, the other measure of an algorithm, drawing against driving
 * away; and in a question about spelling, the spelling. */
Test(guard, shared_or_apart_since_or_until_and_spelling)
{
    VETO("What do Java and Kotlin have in common?", "What is the difference between Java and "
         "Kotlin?", "opposites");
    VETO("How are frogs and toads similar?", "What's the difference between frogs and toads?",
         "opposites");
    VETO("How are mass and weight related?", "What is the difference between mass and weight?",
         "opposites");
    PASS("What is the difference between a cold and the flu?",
         "How do a cold and the flu differ?");
    VETO("How many weeks since New Year?", "How many weeks until New Year?", "opposites");
    VETO("How do I sort a singly linked list?", "How do I sort a linked list?", "singly");
    VETO("What is the time complexity of mergesort?", "What is the space complexity of "
         "mergesort?", "opposites");
    VETO("How do I attract hummingbirds to my yard?", "How do I get rid of hummingbirds in my "
         "yard?", "opposites");
    VETO("Spell check: definitely", "Spell check: definately", "spelling");
    VETO("How do you spell accommodate?", "how do you spell accomodate", "spelling");
    PASS("How do I improve my handwritting?", "How do I improve my handwriting?");
}

/* A command's option and a regex escape are code, read in their case; quoted text is read
 * with its spaces; "all" reaches its plural past its modifiers, and a plural the lexicon
 * knows as a word of its own. */
Test(guard, options_escapes_quoted_spaces_and_all_of_a_plural)
{
    VETO("What does grep -i do?", "what does grep -I do", "case");
    VETO("What does the regex \\w+ match?", "what does the regex \\W+ match", "case");
    PASS("What does ls -l show?", "what does the ls -l command show");
    VETO("What does \"a b\".split() return in Python?",
         "what does \"a  b\".split() return in python", "spaces");
    PASS("What does \"a b\".split() return in Python?",
         "In Python, what does \"a b\".split() return?");
    VETO("How long is the string 'x  y'?", "how long is the string 'x y'", "spaces");
    VETO("How do I escape ' in \"a  b\" with sed?", "how do i escape ' in \"a b\" with sed",
         "spaces");
    VETO("What does Zo\xc3\xab's \"a  b\".split() return?",
         "what does Zo\xc3\xab's \"a b\".split() return", "spaces");
    PASS("Why don't cats like the word 'bath'?", "why dont cats like the word 'bath'");
    VETO("How do I kill a process in Linux?", "How do I kill all stuck zombie processes in Linux?",
         "scope");
    VETO("How do I hide a column in Excel?", "how do i hide all columns in excel", "scope");
}

Test(guard, one_word_differs_past_an_opening_one_side_leaves_out)
{
    VETO("What is the flash point of diesel?", "boiling point of diesel", "one word");
    VETO("What are the side effects of melatonin?", "side effects of valerian", "one word");
    VETO("What is the specific heat of water?", "specific gravity of water", "one word");
    /* a terse query rewords more: abbreviations, synonyms, function words */
    PASS("What is the square root of 81?", "sqrt of 81");
    PASS("What is the biggest desert in the world?", "largest desert in the world");
    PASS("What are the best horror films of all time?", "best horror movies of all time");
    PASS("What is the population of Canada?", "population of canada");
}

Test(guard, more_measures_and_actions_that_differ)
{
    VETO("What is the cheapest way to get to the airport?", "fastest way to the airport",
         "opposites");
    VETO("What is the worst-case complexity of merge sort?",
         "average case complexity of merge sort", "opposites");
    VETO("How do I keep my local changes when I pull?",
         "how do i discard my local changes when i pull", "opposites");
    VETO("When was the Great Wall of China built?", "when did the great wall of china fall",
         "opposites");
    VETO("Which is the capital of Mali?", "which is the capital of malawi", NULL);
    VETO("What does typeof null give in JavaScript?", "what does typeof undefined give in js",
         NULL);
    PASS("What is the cheapest way to get to the airport?",
         "cheapest way to get to the airport");
}

Test(guard, abbreviated_types_sports_and_text_tasks)
{
    VETO("How do I convert a string to an integer in Rust?", "rust convert int to string",
         "order reversed");
    PASS("How do I convert miles to kilometers?", "miles to km how to convert");
    VETO("How do I print the third column of a file with awk?",
         "awk print the third line of a file", NULL);
    VETO("How many players are on a hockey team?", "how many players on a rugby team", NULL);
    VETO("How do I squash my last two commits?", "git revert my last two commits", NULL);
    VETO("Proofread this paragraph for me.", "translate this paragraph for me", NULL);
}

Test(guard, names_written_short_or_as_their_people)
{
    PASS("How do I restart a deployment in Kubernetes?", "k8s restart a deployment");
    PASS("How do I reverse a string in Python?", "py reverse a string");
    PASS("What is the national dish of Sweden?", "swedish national dish");
    PASS("What does the virtual keyword do in C++?", "c++ what does virtual keyword do");
    VETO("How do I upgrade to IPv6?", "how do i upgrade to ipv4", NULL);
}

Test(guard, numbers_as_people_type_them)
{
    PASS("How much is a quarter cup of butter in grams?", "1/4 cup of butter in grams");
    VETO("How much is 1/3 cup of butter in grams?", "1/4 cup of butter in grams", "numbers");
    PASS("What is the 60/40 portfolio rule?", "explain the 60 40 portfolio rule");
    PASS("How do I fall asleep faster?", "how 2 fall asleep faster");
    PASS("Give me tips for writing a resume.", "any tips 4 writing a resume");
    VETO("How do I merge 2 lists?", "how do i merge 4 lists", "numbers");
    PASS("How do I concatenate two strings in Java?", "java join two strings into one");
    VETO("How do I split a string into two?", "how do i split a string into three", "numbers");
}

Test(guard, what_a_close_call_may_leave_to_be_understood)
{
    close_call("What is the difference between a lease and a rental agreement?",
               "lease vs rental agreement", 1, NULL);
    close_call("What's the diffrence between affect and effect?", "affect versus effect", 1,
               NULL);
    close_call("Why do tides happen?", "what causes the tides on earth", 1, NULL);
}

/* Texts read within their lengths: copies of exact size, no NUL after them to stop a read
 * past the end (the sanitizer build reports one). */
static void exact(const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);
    char *x = malloc(al), *y = malloc(bl);
    cr_assert(x && y);
    memcpy(x, a, al);
    memcpy(y, b, bl);
    char why[128];
    gw_guard_compatible(x, al, y, bl, why, sizeof why);
    gw_guard_close_call(x, al, y, bl, why, sizeof why);
    free(x);
    free(y);
}

Test(guard, counts_in_text_speak_positions_and_reads_within_the_text)
{
    VETO("best 2 player board games", "best 4 player board games", "numbers");
    VETO("Do I need 2 GB of RAM?", "do i need 4 GB of RAM", "numbers");
    PASS("How do I boil an egg?", "how 2 boil an egg");
    exact("1/4", "1/4 cup");
    exact("ww1/4 of the army", "1/4 of the army");
    exact("a 1/", "a 1/2");
    /* "differ..." words that are no difference, and a tool that is not the system */
    close_call("What's the difficulty of Python vs Java?", "Python vs Java", 0, "difficulty");
    VETO("How do I install kubectl?", "How do I install Kubernetes?", NULL);
}

Test(guard, temperatures_dotted_letters_makers_and_kinds_of_answer)
{
    /* a temperature glued to its number, or its scale's letter after one */
    PASS("How long do I roast potatoes at 425 degrees Fahrenheit?",
         "roast potatoes 425F how long");
    PASS("What is 40°C in Fahrenheit?", "convert 40 degrees C to fahrenheit");
    VETO("What is 40°C in Fahrenheit?", "What is 40°F in Celsius?", "40");
    PASS("How do I use C in embedded systems?", "how do i use c for embedded systems");
    /* U.S. is the US, NYC New York; "e.g." says nothing; w/o is without */
    PASS("Who was the third president of the United States?", "third U.S. president");
    PASS("What is the population of New York?", "NYC population");
    PASS("How do I sort a list by length, e.g. shortest first?",
         "How do I sort a list by length, shortest first?");
    PASS("How do I clean an oven without chemicals?", "clean oven w/o chemicals");
    /* a maker's name before its product's, which the other side names alone */
    PASS("How do I turn on dark mode in Google Chrome?", "chrome dark mode how to enable");
    VETO("How do I share my location in Google Maps?",
         "How do I share my location in Apple Maps?", "google");
    /* (a maker's: not a place's word, nor a first name; NYC alone keeps a city's C) */
    VETO("What is the capital of New Mexico?", "What is the capital of Mexico?", "new");
    VETO("Who is Michelle Obama?", "Who is Obama?", "michelle");
    VETO("What does NBC stand for?", "What does New Balance stand for?", NULL);
    /* "without deleting it" keeps it; "or not" denies nothing */
    close_call("How do I delete a file from git but keep it on my computer?",
               "remove a file from git without deleting it on my computer", 0, "keep");
    PASS("How do I delete a file from git but keep it on my computer?",
         "remove a file from git without deleting it on my computer");
    PASS("whether or not to rent a car in Iceland", "whether to rent a car in Iceland");
    /* a person, a place and a time are three answers */
    VETO("Who painted the Mona Lisa?", "What year was the Mona Lisa painted?", "question");
    VETO("Where was the treaty signed?", "When was the treaty signed?", "question");
    /* more that differ */
    VETO("How do I restart a container in docker compose?",
         "How do I rebuild a container in docker compose?", "opposites");
    VETO("How many tablespoons in a cup?", "How many tablespoons in a fluid ounce?", NULL);
    VETO("Who won the 2010 World Cup?", "Who hosted the 2010 World Cup?", "opposites");
    VETO("How many moles are in 36 g of water?", "How many molecules are in 36 g of water?",
         NULL);
    /* a frequency, a measure, a vehicle; W-2 is w2; "not blank" is "non-empty";
     * "per second" is no 2nd */
    VETO("What is the annual fee for the premium card?",
         "What is the monthly fee for the premium card?", "opposites");
    VETO("What's the maximum bag size for easyJet?", "What's the maximum bag weight for easyJet?",
         "opposites");
    VETO("how to fix a flat tire on a car", "how to fix a flat tire on a motorcycle",
         "opposites");
    PASS("What is a W-9 form?", "what's a w9 form");
    VETO("What is a W-9 form?", "What is a W-4 form?", "numbers");
    PASS("How many non-empty rows are in the sheet?", "how many rows are not blank in the sheet");
    PASS("How far does sound travel in a second?", "how far does sound travel per second");
    /* another one asked for; but "another word" is a synonym */
    VETO("Tell me a riddle about cats.", "Tell me another riddle about cats.", "another");
    PASS("What's another word for tired?", "synonym for tired");
}

/* Fractions in words, a count against a rank, "=" asking, a place's "in", what is paid for,
 * currency codes, "big O", "^", a clause with a light verb. */
Test(guard, fractions_ranks_and_currencies)
{
    PASS("How many ml is two thirds of a cup?", "2/3 cup in ml");
    PASS("a third of a pound in grams", "how many grams is 1/3 lb");
    VETO("What is one third of 90?", "What is one fourth of 90?", "numbers");
    VETO("What is a third of 60?", "What is 3 of 60?", "numbers");
    PASS("three quarters of an hour in minutes", "3/4 hour in minutes");
    /* a count on one side, a rank on the other; a label's number is neither */
    VETO("Which are the 3 largest lakes in Canada?", "Which is the 3rd largest lake in Canada?",
         "numbers");
    PASS("Who was the 3rd president of France?", "who was the third french president");
    PASS("What caused World War 1?", "what caused the first world war");
    PASS("summary of chapter 4 of Dune", "summarize the fourth chapter of Dune");
    /* "=" at the end asks; "15%" is a number's percent sign */
    PASS("What is 30% of 250?", "30 percent of 250 = ?");
    VETO("12*4 =", "12+4 =", "operators");
    PASS("What is 3 to the power of 4?", "what is 3^4");
    /* "in Ohio" is a place's, no opposite of "check-out" */
    PASS("When is check-out time at the Hilton in Ohio?", "Ohio Hilton check out time?");
    VETO("Can I grow basil indoors?", "Can I grow basil outside?", "opposites");
    /* "is shipping free" is what it costs; "sugar free" still says without sugar */
    PASS("Is delivery free on orders over $30?",
         "do orders above thirty dollars get free delivery");
    VETO("Is this yogurt sugar free?", "Does this yogurt have sugar?", "negation");
    PASS("How much is 50 USD in yen?", "convert $50 to yen");
    VETO("How much is 50 USD in yen?", "How much is 50 EUR in yen?", NULL);
    /* big O is the time complexity */
    PASS("What is the big O of merge sort?", "time complexity of merge sort");
    VETO("big O of merge sort", "big O of bubble sort", NULL);
    /* two numbers a minus, a dash, a slash or a colon joins, the other way round */
    VETO("What is 12-5?", "What is 5-12?", "order");
    VETO("Did the game end 3 - 1?", "Did the game end 1 - 3?", "order");
    VETO("Is 4:3 wider than 16:9?", "Is 3:4 wider than 16:9?", "order");
    PASS("What is 12-5?", "what is 12 - 5");
    PASS("a 5x3 rug in square feet", "3x5 rug area in square feet");
    /* "how old", "at what age" ask a when; a maker's name before the model both name */
    close_call("At what age can a child sit in the front seat?",
               "how old does a kid have to be to sit in the front seat", 1, NULL);
    close_call("When should a kitten be spayed?", "kitten spaying - at what age?", 1, NULL);
    close_call("2019 corolla oil capacity", "What is the oil capacity of a 2019 Toyota Corolla?",
               1, NULL);
    /* (not "how old is": an age, no when; "is breakfast free" asks more than whether there
     * is one; "two third-party apps" are two) */
    close_call("How old is the Colosseum?", "When was the Colosseum built?", 0, "asks");
    VETO("Is breakfast free at the Hilton?", "Does the Hilton serve breakfast?", "negation");
    PASS("two third-party apps for notes", "2 third-party apps for notes");
    /* a when asked at the end; an essay is no list; a hexagon no heptagon; "sqrt" is the
     * square root; pandas is Python's; kubectl Kubernetes'; "two and a half" is 2.5; a verb
     * before the name a maker's name stands before ("clear chrome cache") */
    VETO("The Eiffel Tower was built in what year?", "Who built the Eiffel Tower?", "question");
    VETO("Write an essay about the causes of the French Revolution",
         "Give me a bullet list of the causes of the French Revolution", "opposites");
    VETO("How many sides does a hexagon have?", "How many sides does a heptagon have?", NULL);
    VETO("write a poem about the sea", "write a haiku about the sea", "opposites");
    PASS("What is the square root of 81?", "sqrt(81)");
    VETO("What is the square root of 81?", "cbrt(81)", "operation");
    PASS("numpy array shape", "How do I get the shape of an array in Python with numpy?");
    PASS("How do I list the pods in a Kubernetes namespace?", "kubectl list pods in namespace");
    PASS("Convert 3.5 hours to minutes", "how many minutes is three and a half hours");
    PASS("3 and a half cups in ml", "3.5 cups in ml");
    PASS("three and one half cups in ml", "3.5 cups in ml");
    /* (not a node of a tree, nor a name added beside one: "pip and python"; nor a maker's
     * name before a common noun: "Apple Music" is not music) */
    close_call("how do I delete a node from a linked list",
               "how do I delete a node from a linked list in javascript", 0, "javascript");
    close_call("how to upgrade pip", "how to upgrade pip and python", 0, "python");
    VETO("how to update Apple Music", "how to update music", "apple");
    /* a task's text after a colon differs in any word, a pronoun too; a list's order */
    VETO("Translate into Spanish: he is hungry.", "Translate into Spanish: she is hungry.",
         "text given");
    VETO("Correct the grammar: I has two cats", "Correct the grammar: we has two cats",
         "text given");
    PASS("Translate into Spanish: he is hungry.", "translate to spanish: he is hungry");
    /* (the whole text, however long: the difference at its end) */
    char la[1200] = "Translate into French: ", lb[1200];
    for (int k = 0; k < 40; k++)
        strcat(la, "the weather was fine and ");
    strcpy(lb, la);
    strcat(la, "he is tired.");
    strcat(lb, "she is tired.");
    VETO(la, lb, "text given");
    VETO("What is the third number in 4, 7, 1?", "What is the third number in 7, 4, 1?",
         "order");
    /* "if I filed late": a condition the other does not set */
    VETO("How much is the penalty for unpaid taxes?",
         "How much is the penalty for unpaid taxes if I got an extension?", "adds");
}

Test(guard, quotations_percentages_spellings_and_dates)
{
    /* quoted text is a task's text: any word of it counts, a pronoun too; a quotation of a
     * part of the other's (the module an error message names) is no other text */
    VETO("translate \"we are late\" into German", "translate \"they are late\" into German",
         "quoted");
    PASS("translate \"we are late\" into German", "Translate \"we are late.\" into German");
    PASS("What does the error 'No module named numpy' mean?",
         "getting a No module named 'numpy' error, what does it mean");
    /* an answer asked as a percentage is not the amount a percentage gives */
    VETO("What is 30% of 150?", "What is 30 as a percentage of 150?", "percentage");
    VETO("what is 20 percent of 60", "20 is what percent of 60", "percentage");
    PASS("What is 30% of 150?", "what's thirty percent of 150");
    /* running and stopped are two states */
    VETO("how do I list running services with systemctl",
         "how do I list stopped services with systemctl", "opposites");
    /* two letters swapped late in a word of six; not early (causal, casual) */
    PASS("How do I find the length of a string in Go?", "how to find the lenght of a string in go");
    VETO("what is a causal relationship", "what is a casual relationship", NULL);
    /* C sharp is C#, MS Excel Microsoft's; a director is no composer */
    PASS("How do I read a file line by line in C#?", "read a file line by line in c sharp");
    VETO("How do I read a file line by line in C#?", "How do I read a file line by line in C?",
         "c#");
    PASS("How do I freeze the top row in Microsoft Excel?", "freeze top row in MS Excel");
    VETO("Who directed Jaws?", "Who produced Jaws?", "opposites");
    /* a close call: a date asked without a question word is a when; "convert" and the word
     * "degrees" beside a degree sign add nothing */
    close_call("When did the Berlin Wall fall?", "Berlin Wall fall date", 1, NULL);
    close_call("How long does a passport renewal take?", "passport renewal processing time", 1,
               NULL);
    close_call("Convert 350 degrees Fahrenheit to Celsius", "What is 350°F in Celsius?", 1, NULL);
    close_call("Translate 'good night' into Korean", "'good night' in Korean", 1, NULL);
}

Test(guard, names_that_begin_alike_and_things_named_like_places)
{
    /* a country's name that another name begins with; a country's city or a state of its
     * name; a people or a language is the country's, and a product's names are one */
    VETO("What is the GDP of India?", "What is the GDP of Indiana?", "names differ");
    VETO("best time to visit Peru", "best time to visit Perugia", "names differ");
    VETO("How big is Guatemala?", "How big is Guatemala City?", "city or state");
    VETO("What is the state bird of Georgia?", "What is the state bird of the state of Georgia?",
         "city or state");
    PASS("What is the largest city of Canada?", "What is the largest city in Canada?");
    PASS("What do people eat in Korea?", "what do Korean people eat");
    PASS("How do I take a screenshot on a Mac?", "how to screenshot on macOS");
    PASS("How do I rename a column in PostgreSQL?", "postgres rename column syntax");
    /* a thing after an article or a possessive, a name after a preposition */
    VETO("Where can I buy a turkey?", "Where can I buy in Turkey?", "thing vs a name");
    VETO("How do I polish my china?", "How do I polish in China?", "thing vs a name");
    PASS("how to roast a turkey", "How to roast a Turkey");
    PASS("How do I reverse a list in Python?", "reverse a python list");
    PASS("How do I parse a string to an integer in Java?", "java parse String into int");
    /* a country's area is not its population */
    VETO("What is the area of Chile?", "What is the population of Chile?", "opposites");
}

Test(guard, seasons_states_clauses_and_quoted_sentences)
{
    /* planting is not harvesting; a runny yolk is no set one; during a lease is not after */
    VETO("When should I plant garlic?", "When should I harvest garlic?", "opposites");
    VETO("How long do I fry an egg for a runny yolk?", "How long do I fry an egg for a set yolk?",
         "opposites");
    VETO("Can my employer change my hours during my contract?",
         "Can my employer change my hours after my contract?", "opposites");
    VETO("write an email asking for a refund", "write an email declining a refund", "opposites");
    /* a qualifier in a clause of its own narrows as one before the noun does */
    VETO("What snacks are high in protein?", "What snacks are high in protein that kids like?",
         "adds");
    /* a quoted sentence's capital is a sentence's; a quoted word's is the word's */
    PASS("Translate 'How much is this?' into Italian",
         "Translate 'how much is this?' into Italian");
    VETO("Is 'Berlin' == 'berlin' in Python?", "Is 'berlin' == 'berlin' in Python?", "case");
}

Test(guard, exclusions_members_brackets_and_added_instructions)
{
    /* an exclusion however it is written */
    VETO("Which cereals contain sugar?", "Which cereals are free of sugar?", "negation");
    VETO("good snacks for a road trip", "good snacks for a road trip other than chips",
         "negation");
    VETO("easy weeknight dinners", "easy weeknight dinners excluding pasta", NULL);
    /* two members of one module; a slice or a character class read as written */
    VETO("What does json.loads return?", "What does json.load return?", "member");
    VETO("what does re.match do", "what does re.fullmatch do", NULL);
    VETO("What does x[2:] give for x = [4, 5, 6]?", "What does x[:2] give for x = [4, 5, 6]?",
         "brackets");
    PASS("What does x[2:] give for x = [4, 5, 6]?", "what does x[2:] give for x = [4,5,6]");
    /* "to" and "into" say one direction */
    VETO("How do I convert a set to a list in Python?",
         "How do I turn a list into a set in Python?", "order reversed");
    /* a decade is not its first year; a compound food; a salt a letter apart */
    VETO("What did people wear in the 1920s?", "What did people wear in 1920?", "numbers");
    VETO("Can cats eat grapes?", "Can cats eat grapefruit?", "opposites");
    VETO("Is potassium nitrate safe?", "Is potassium nitrite safe?", "opposites");
    /* an answer's layout, asked in a phrase or in an instruction after the question */
    VETO("Summarize the French Revolution.", "Summarize the French Revolution as a table.",
         "adds");
    VETO("What are the noble gases?", "What are the noble gases? Just give the count.",
         "instruction");
    VETO("Describe the water cycle.", "Describe the water cycle. Be brief.", "instruction");
    PASS("What are the noble gases?", "What are the noble gases? Thanks!");
    /* a price that stays is not one that changes */
    VETO("Will the fare stay the same next year?", "Will the fare change next year?",
         "opposites");
}

Test(guard, what_a_review_of_the_new_rules_found)
{
    /* two empty quotations are the same text; curly quotes are quotes */
    PASS("What does print('') output in Python?", "What is the output of print('') in Python?");
    VETO("Translate \u201cwe are late\u201d into German",
         "Translate \u201cthey are late\u201d into German", "quoted");
    /* a swap early in a word of six is another word */
    VETO("sum of angles in a triangle", "sum of angels in a triangle", NULL);
    VETO("Is barley gluten free?", "Is barely gluten free?", NULL);
    /* a people's or a language's word is the country's; "the state of" its economy is no
     * state; Title Case says nothing of names */
    PASS("traditional food in Peru", "traditional Peruvian food");
    PASS("What is the state of India's economy?", "what is the state of the economy of India");
    PASS("how much caffeine is in a coffee", "How Much Caffeine Is In A Coffee");
    /* a percentage asked at the start */
    PASS("How to calculate a percentage increase from 50 to 75",
         "percentage increase from 50 to 75");
}

Test(guard, a_question_both_ask_after_context_that_differs)
{
    const char *a = "Report: sales rose in May. Staff numbers were stable all year. The launch was "
                    "delayed after review. Question: what happened? Please answer briefly.";
    const char *b = "Report: sales rose in May. Staff numbers were stable all year. The launch was "
                    "cancelled after review. Question: what happened? Keep it short.";
    struct gw_core c;
    cr_assert_eq(gw_guard_core(a, strlen(a), b, strlen(b), &c), 1);
    cr_expect_eq(c.asked_after, 1, "the shared question after the changed fact is seen");
    gw_guard_core_free(&c);
}

Test(guard, from_a_thirteenth_blind_set)
{
    /* a quotation's contractions spelled out are the same text; "the current date" is a
     * value, not a when */
    PASS("Translate \"Where is the station?\" into Italian",
         "Translate \"where's the station\" into Italian");
    PASS("translate \"we cannot stay\" into Dutch", "translate \"we can't stay\" into Dutch");
    close_call("What is the shortcut to insert the current time in Google Sheets?",
               "google sheets keyboard shortcut for current time", 1, NULL);
    /* a percentage of an amount is not one taken off it; an original is not a cover; a
     * deadline is not an opening */
    VETO("What is 25% of 60?", "What is 25% off 60?", "off");
    VETO("Who recorded the original version of this song?",
         "Who recorded the best cover of this song?", "opposites");
    VETO("When is the application deadline?", "When does the application open?", "opposites");
    /* a year read in pairs */
    PASS("Who won the World Cup in nineteen ninety-eight?", "Who won the 1998 World Cup?");
}

Test(guard, from_a_fourteenth_blind_set)
{
    /* the same choice in another order; a number with its letter; first aid counts
     * nothing; an age is no duration asked; a deadline is a when; hedges add nothing */
    PASS("Is it 'fewer items' or 'less items'?", "which is correct: less items vs fewer items");
    PASS("What is the 403(b) contribution limit for 2025?", "2025 403b max contribution");
    PASS("How do I treat a small cut at home?", "first aid for a minor cut");
    PASS("How much sleep does a 4 year old need?",
         "my daughter is 4, how many hours of sleep should she get");
    close_call("What is the deadline to register to vote in Ohio?",
               "ohio voter registration due date", 1, NULL);
    close_call("How tall is Mount Kilimanjaro?", "roughly how tall is mount kilimanjaro", 1,
               NULL);
    /* a dict by its keys or its values; an acronym another begins; "I give my landlord" or
     * "my landlord gives me"; a conversion's end as the other's start; one thing or many */
    VETO("sort a python dict by key", "sort a python dict by value", "opposites");
    VETO("What does EBITDA mean?", "What does EBIT mean?", "names");
    VETO("How much notice must I give my employer in Texas before quitting?",
         "How much notice must my employer give me in Texas before I am laid off?", "roles");
    VETO("Convert a CSV string to a set in Python", "Convert a Python dict to a CSV string",
         "direction");
    VETO("How do I delete a branch in git?", "How do I delete multiple branches in git?",
         "scope");
    PASS("How many weeks are in a trimester?", "a trimester is how many weeks");
}

Test(guard, from_a_second_hunt_for_wrong_hits)
{
    /* a choice against one of it; a quantifier a yes or no is asked of; near negatives */
    VETO("Is a peanut a nut or a legume?", "Is a peanut a legume?", "choice");
    PASS("Is a peanut a nut or a legume?", "is a peanut a legume or a nut");
    VETO("Do penguins fly?", "Do all penguins fly?", "scope");
    VETO("Do some frogs glow?", "Do most frogs glow?", "opposites");
    PASS("Are all triangles polygons?", "Is every triangle a polygon?");
    VETO("Why do I barely dream?", "Why do I dream?", "negation");
    VETO("Why do I rarely get colds?", "Why do I get colds?", "negation");
    PASS("Why do I hardly sleep?", "why do i barely sleep");
    /* an owner and what it owns, traded; units and injuries a letter apart */
    VETO("What do you call your father's sister?", "What do you call your sister's father?",
         "order");
    VETO("How many megabits are in a gigabyte?", "How many megabytes are in a gigabyte?", NULL);
    VETO("How long does a sprained wrist take to heal?",
         "How long does a strained wrist take to heal?", "opposites");
    VETO("Does the buyer or the seller pay closing costs?", "Does the seller pay closing costs?",
         "choice");
}

Test(guard, signs_that_code_reads)
{
    /* the same words, signs that commands, patterns and operators read otherwise */
    VETO("What does git add . do?", "What does git add - do?", "signs");
    VETO("What does cp -r ./src do?", "What does cp -r /src do?", "signs");
    VETO("What does the regex a+ match?", "What does the regex a+? match?", "signs");
    VETO("What does $@ mean in bash?", "What does $* mean in bash?", "signs");
    /* a string is not the value it spells */
    VETO("What does len('42') return?", "What does len(42) return?", "signs");
    VETO("What is '5' * 2 in JavaScript?", "What is 5 * 2 in JavaScript?", "signs");
    /* a sentence's punctuation, a hyphened or dotted word, a price and spaced arithmetic
     * are no such signs */
    PASS("Translate \"Is it raining?\" into Spanish", "translate \"is it raining\" into spanish");
    PASS("step-by-step guide to tiling a floor", "step by step guide to tiling a floor");
    PASS("What is the U.K. population?", "what is the UK population");
    PASS("what is 9-4", "What is 9 - 4?");
    PASS("How much is $30 in yen?", "how much is 30 dollars in yen");
    /* symbols and units both sides write with capitals, in another case */
    VETO("What is the density of HF?", "What is the density of Hf?", "case");
    VETO("How many bits are in 8 MB?", "How many bits are in 8 Mb?", "case");
    PASS("how to learn SQL fast", "how to learn Sql fast");
    PASS("is it OK to eat eggs daily", "is it Ok to eat eggs daily");
    PASS("Is print('hi') the same as print(\"hi\") in Python?",
         "is print(\"hi\") the same as print('hi') in python");
}

Test(guard, from_a_fifteenth_blind_set)
{
    /* how often, asked of a yes or no; a text made shorter or longer; what led to a thing
     * and what followed it */
    VETO("Can dogs eat rice?", "can dogs eat rice every day", "often");
    PASS("Is it safe to drink coffee every morning?",
         "is drinking coffee every single morning safe");
    VETO("Shorten this paragraph: the meeting ran late.",
         "Make this paragraph longer: the meeting ran late.", "opposites");
    VETO("What were the causes of the Great Depression?",
         "What were the effects of the Great Depression?", "opposites");
    /* "== vs ===" is no "what is" asked with an equals sign; an explanation asked adds
     * nothing */
    PASS("What is the difference between != and !== in JavaScript?", "javascript != vs !==?");
    close_call("What is a neutron star?", "neutron star explanation pls", 1, NULL);
    /* what sets two things apart is no yes or no; "will vs trust" is no "will" asked */
    VETO("What's the difference between butter and margarine?",
         "Can I substitute margarine for butter?", "question differs");
    PASS("What is the difference between a will and a trust?", "will vs trust");
}

Test(guard, from_a_sixteenth_blind_set)
{
    /* a name a word of phrasing begins; a percentage added; sibling settings */
    VETO("How do I use useState in React?", "How do I use useRef in React?", "one word");
    VETO("What is 20% of 150?", "What is 150 increased by 20%?", "percentage");
    VETO("How early should I get to the airport for a domestic flight?",
         "How early should I get to the airport for an international flight?", "opposites");
    VETO("Write a formal note to my neighbour about the noise",
         "Write a friendly note to my neighbour about the noise", "opposites");
    VETO("Can I pack a lighter in checked luggage?", "Can I pack a lighter in my carry-on?",
         "opposites");
    /* "can someone explain how" asks how, as a request */
    PASS("How do I use INDEX MATCH in Excel?",
         "Can someone explain how to use INDEX MATCH in Excel?");
}

Test(guard, what_a_review_of_this_rounds_rules_found)
{
    /* an all but negation is not a whole one; both are the negation rule's */
    VETO("Does it rarely rain in Arizona?", "Does it never rain in Arizona?", "negation");
    VETO("Why can I hardly hear?", "Why can't I hear?", "negation");
    /* an acronym one letter longer, "some", "all right" and a string's kind are no scope,
     * name or direction */
    PASS("Is the US bigger than Canada?", "Is the USA bigger than Canada?");
    PASS("Can I take some aspirin for a fever?", "Can I take aspirin for a fever?");
    PASS("Is it all right to eat cheese while pregnant?",
         "Is it okay to eat cheese while pregnant?");
    PASS("How to convert a time string to a datetime in Python",
         "How to convert a string to time in Python");
    /* punctuation of prose is no sign; case in shouted text, a sentence's first word or an
     * acronym written as a name says nothing */
    PASS("Python - how to reverse a list", "Python: how to reverse a list");
    PASS("Wait... what is recursion?", "Wait, what is recursion?");
    PASS("Help!! How do I reset my modem", "Help! How do I reset my modem");
    PASS("What is **osmosis**?", "What is osmosis?");
    PASS("A / B testing tips", "A/B testing tips");
    PASS("Translate \"goodbye\", please", "Translate goodbye, please");
    PASS("Will AI replace teachers?", "Will Ai replace teachers?");
    PASS("HOW DO I RESET MY IPAD", "How do I reset my iPad");
    /* a number said twice is matched to its own occurrence: the same text passes */
    PASS("Is 3 kg heavier than 3 lb?", "is 3 kg heavier than 3 lb");
    /* a "to" both say is theirs whatever their other "to"s say */
    PASS("best way to respond to the greatest weakness interview question",
         "Best way to respond to the greatest weakness interview question?");
    VETO("How to convert a list to a tuple", "How to convert a tuple to a list", "order");
    VETO("Is 3 kg heavier than 3 lb?", "Is 3 lb heavier than 3 kg?", "order");
}

Test(guard, conditions_plain_answers_and_motions)
{
    /* a condition of the asker's in a clause of its own, added in other words */
    VETO("Is it safe to take aspirin and ibuprofen together?",
         "Can I take aspirin and ibuprofen together while pregnant?", "pregnant");
    /* a plain answer asked is any answer; the motion "how fast" implies; a shortcut asked
     * for a how-to */
    PASS("What is inflation?", "can you explain inflation in simple terms");
    PASS("What is DNS?", "explain DNS in plain english");
    close_call("What is the speed of sound?", "how fast does sound travel", 1, NULL);
    close_call("How do I undo in Word?", "word undo shortcut", 1, NULL);
    /* but not a child asked for, nor another motion's measure */
    VETO("What is inflation?", "explain inflation to a 5 year old", NULL);
}

Test(guard, from_a_seventeenth_blind_set)
{
    /* a life stage, a medium, a tone, a container of another kind */
    VETO("How much should I feed an adult dog?", "how much to feed a puppy", "opposites");
    VETO("What's a good book to read after Dune?", "What's a good movie to watch after Dune?",
         "opposites");
    VETO("Write a polite message asking my neighbour to turn the music down.",
         "Write a firm message telling my neighbour to turn the music down.", "opposites");
    VETO("How do I sort a dict in Python?", "How do I sort a list in Python?", "opposites");
    /* but the same thing named twice is no contrast */
    PASS("How often should I feed my kitten?", "kitten feeding how often");
    PASS("books like harry potter", "What are some books similar to Harry Potter?");
    /* a maker's name before a name both give, where the other has no name before it */
    PASS("How do I clear the cache in Google Chrome?", "how to clear chrome's cache");
    VETO("How good is Apple Maps offline?", "How good is Google Maps offline?", "name");
    VETO("Who wrote Jane Austen's Emma?", "who wrote austen's emma", "jane");
}

Test(guard, from_an_eighteenth_blind_set)
{
    /* an excess asked; the same words, one said once more; a trade with other words after
     * it; how many exactly */
    VETO("How much caffeine should I have a day?", "How much caffeine is too much in a day?",
         "excess");
    PASS("What is the maximum safe dose of caffeine?", "how much caffeine is too much");
    VETO("What's the difference between a will and a living trust?",
         "What's the difference between a living will and a living trust?", "more often");
    PASS("git merge vs rebase", "How is git rebase different from git merge?");
    PASS("What's the difference between baking soda and baking powder?",
         "bakign powder vs baking soda diffrence");
    VETO("Can I use butter instead of oil in brownies, and how much?",
         "Can I use oil instead of butter in muffins, and how much?", "order");
    VETO("What are the odds of at least one head in three coin flips?",
         "What are the odds of exactly one head in three coin flips?", "opposites");
    VETO("How do I remove all stopped Docker containers?",
         "How do I remove all dangling Docker images?", "opposites");
    VETO("How much protein should I eat a day?", "How much fiber should I eat a day?",
         "opposites");
    /* an age, a thousand and a "with" written short */
    PASS("What's a good bedtime for a 6-year-old?", "good bedtime for my 6yo?");
    PASS("fun games for a 9 year old", "fun games for a 9 yo");
    VETO("What's a good bedtime for a 6-year-old?", "good bedtime for my 8yo?", "numbers");
    PASS("Can I afford a house on a 90,000 salary?", "can i afford a house on 90k salary");
    PASS("salary of 1.5k a month", "salary of 1500 a month");
    PASS("difference between 401k and ira", "401(k) vs IRA, differences?");
    PASS("how many miles is a 5k", "5 km in miles?");
    VETO("how long to train for a 10k run", "how long to train for a 10,000 run", "numbers");
    VETO("can i afford a house on 90k salary", "can i afford a house on 60k salary",
         "numbers");
    PASS("Can I rent a car in Spain with a US license?",
         "can i rent a car in spain w/ a us license");
    /* a question's words in text speak; a letter that is a variable stays one */
    PASS("How do I get a stain out of a carpet?", "hw do i get a stain out of carpet");
    PASS("What should I cook for dinner tonight?", "wat should i cook for dinner tonight");
    PASS("Why is my wifi so slow?", "y is my wifi so slow");
    PASS("What are index funds?", "what r index funds");
    VETO("solve 2x + 3 = 7 for x", "solve 2x + 3 = 7 for y", NULL);
    /* roles: what eats a thing or what it eats; whose thing the asker acts on */
    VETO("What animals eat rabbits?", "What do rabbits eat?", "roles");
    VETO("Which birds eat wasps?", "What do wasps eat?", "roles");
    PASS("What do rabbits eat?", "what do rabbits usually eat");
    VETO("Can my landlord keep my deposit?", "Can I keep my landlord's deposit?", "roles");
    PASS("Can my landlord keep my deposit?", "is my landlord allowed to keep my deposit");
    PASS("Can I read my husband's texts?", "am i allowed to read my husband's texts");
    /* an amount per a time or a person on one side only; the whole a percentage is of */
    VETO("How much does Spotify cost?", "How much does Spotify cost per year?", "rate");
    VETO("How much does a caterer cost?", "How much does a caterer cost per person?", "rate");
    PASS("How much does Spotify cost a month?", "spotify monthly price");
    PASS("How many hours of sleep does a teenager need?", "how much sleep do teens need a night");
    PASS("How many tablespoons are in a quarter cup?", "quarter cup = how many tbsp");
    VETO("What is 20% of 60?", "60 is 20% of what number?", "whole");
    PASS("What does NATO stand for?", "NATO is an abbreviation of what?");
    VETO("Who beat Spain in the 2010 World Cup final?",
         "Who beat Spain in the 2010 World Cup semifinal?", "opposites");
}

/* Writes words, one a line, to a new file; its path into path. */
static void word_file(char *path, const char *words)
{
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f);
    fputs(words, f);
    fclose(f);
}

Test(guard, misspellings_read_with_a_list_of_known_words)
{
    /* without a list, a slip inside a short word is another word */
    VETO("How do I change a car tire?", "how do i chnage a car tire", NULL);
    char err[256], path[] = "/tmp/guard-words-XXXXXX";
    cr_assert_eq(gw_guard_known_words("/nonexistent/words", err, sizeof err), -1);
    cr_assert(strstr(err, "/nonexistent/words"), "%s", err);
    /* (entries that are no lower-case word are skipped: a word piece, a marker, a name) */
    word_file(path, "change\nwrite\nletter\nboil\nbroil\npotatoes\ncar\ncat\nwash\ndesert\n"
                    "dessert\nbest\naddress\ntraveled\ntravelled\ncomplement\ncompliment\n"
                    "##ing\n[CLS]\nParis\n3d\n");
    cr_assert_eq(gw_guard_known_words(path, err, sizeof err), 0, "%s", err);
    unlink(path);
    PASS("How do I change a car tire?", "how do i chnage a car tire");
    PASS("How do I write a resignation letter?", "How do I wirte a resignation letter?");
    PASS("How do I change my address?", "How do I change my adress?");
    /* neither on the list: a letter left out or two swapped, not one changed */
    PASS("How do I cook quinoa?", "How do I cook quiona?");
    /* two known words a slip apart are two words */
    VETO("How do I boil potatoes?", "how do i broil potatoes", NULL);
    VETO("How do I wash my car?", "How do I wash my cat?", NULL);
    VETO("best desert in the world", "best dessert in the world", NULL);
    VETO("What is a complement in grammar?", "What is a compliment in grammar?", NULL);
    PASS("Where has the pope traveled?", "Where has the pope travelled?");
    /* a name is no misspelling, either way round */
    VETO("What is the capital of Austria?", "What is the capital of Austra?", NULL);
    VETO("how does the fetchData function work", "how does the fetchdta function work", NULL);
    /* a second list adds to the first */
    char more[] = "/tmp/guard-words-XXXXXX";
    word_file(more, "amylase\namylose\n");
    cr_assert_eq(gw_guard_known_words(more, err, sizeof err), 0, "%s", err);
    unlink(more);
    VETO("What does amylase do?", "What does amylose do?", NULL);
    PASS("What does amylase do?", "What does amylsae do?");
    PASS("How do I change a car tire?", "how do i chnage a car tire");
}

Test(guard, from_a_twentieth_blind_set)
{
    /* the subjects of the question opposites, though each side names both; where a thing
     * thaws; how done a yolk is */
    VETO("how much notice does a tenant have to give to end a lease in Texas",
         "how much notice does a landlord have to give a tenant to end a lease in Texas",
         "subjects");
    PASS("how much notice does a tenant have to give to end a lease in Texas",
         "texas: how much notice must a tenant give to end a lease");
    VETO("Is it safe to refreeze meat thawed in the fridge?",
         "Is it safe to refreeze meat thawed in the microwave?", "opposites");
    VETO("how long to boil an egg for a jammy yolk", "how long to boil an egg for a hard yolk",
         "opposites");
    /* a power written raised, a million as M, a decimal before a million; a system a name
     * of its implies */
    PASS("What's the derivative of x^2?", "derivative of x²");
    VETO("What's the derivative of x^2?", "derivative of x³", "numbers");
    PASS("a Postgres table with 20 million rows is slow", "slow 20M-row postgres table");
    PASS("a city of 1.5 million people", "a city of 1,500,000 people");
    VETO("a city of 1.5 million people", "a city of 15 million people", "numbers");
    PASS("run 20m", "run 20m");
    PASS("iphone battery draining fast after update",
         "my iPhone battery drains quickly since the latest iOS update");
    /* steps of a task, drugs (a brand and its generic alike), pets, where food keeps */
    VETO("How do I create a zip archive in Linux?", "how do i extract a zip archive in linux",
         "opposites");
    VETO("How do I create a conda environment?", "how do I activate a conda environment",
         "opposites");
    VETO("side effects of lisinopril", "side effects of losartan", "opposites");
    PASS("Can I take acetaminophen with ibuprofen?", "can i take tylenol with advil");
    VETO("Can dogs eat cheese?", "Can cats eat cheese?", "opposites");
    VETO("How long does soup last in the fridge?", "How long does soup last in the freezer?",
         "opposites");
    /* phrasing that asks nothing */
    PASS("Why do cats purr?", "Thanks in advance: why do cats purr?");
    PASS("Is 91 a prime number?", "is 91 prime or not");
}

Test(guard, from_a_third_hunt_for_wrong_hits)
{
    /* avoiding said in other words */
    VETO("What foods should I eat before a blood test?",
         "What foods should I stay away from before a blood test?", NULL);
    VETO("What drinks help with heartburn?", "What drinks should I cut out for heartburn?",
         NULL);
    VETO("Which plugins should I install for security?",
         "Which plugins should I get rid of for security?", "opposites");
    /* the place, vessel or means a how-to is asked for, added at its end */
    VETO("How do I make a mug cake?", "How do I make a mug cake in an air fryer?", "adds");
    VETO("How do I grow mint?", "How do I grow mint from cuttings?", "adds");
    PASS("How do I check my oil level?", "How do I check the oil level in my car?");
    /* every other one; a who against another question in other words */
    VETO("How do I shade a row in Google Sheets?",
         "How do I shade every other row in Google Sheets?", "every other");
    VETO("What was the significance of the Monroe Doctrine?", "Who wrote the Monroe Doctrine?",
         "who");
    PASS("Who wrote Hamlet?", "which author wrote hamlet");
    /* the most and the latest; a framework and its successor */
    VETO("Which team has won the most Super Bowls?",
         "Which team won the most recent Super Bowl?", NULL);
    VETO("How do I set up routing in AngularJS?", "How do I set up routing in Angular?",
         "opposites");
    /* what the asker does to another, done to the asker */
    VETO("How do I sue my employer?", "How do I respond to my employer suing me?", "roles");
    VETO("How do I hire a dog walker?", "How do I get hired as a dog walker?", "roles");
    VETO("How do I report a fake account?", "What do I do if I was reported as a fake account?",
         "roles");
    PASS("How do I merge two dictionaries in Python?", "In Python, how can 2 dicts be merged?");
    PASS("How should I explain divorce to a 5-year-old?",
         "tips for telling my five year old that we're getting divorced");
    /* another superlative; a means said at length */
    VETO("What is the fastest way to learn Spanish?",
         "What is the most enjoyable way to learn Spanish?", NULL);
    PASS("Which country has the largest population?", "most populous country in the world");
    VETO("What's the cheapest way to heat a house?",
         "What's the most environmentally friendly way to heat a house?", "superlative");
    VETO("How do I wash a duvet?", "How do I wash a duvet in the washing machine?", "adds");
}

Test(guard, from_a_nineteenth_blind_set)
{
    /* measured once untouched, then: steps and kinds that are not one another */
    VETO("How do I merge two cells in Excel?", "how do I split a cell into two in Excel", NULL);
    VETO("How do I combine two columns in Excel?", "How do I split a column in two in Excel?",
         "opposites");
    VETO("How many Grammys did Adele win?", "How many Grammys was Adele nominated for?",
         "opposites");
    VETO("Give me a summary of the Gettysburg Address",
         "Give me the full text of the Gettysburg Address", "opposites");
    VETO("When was the old stadium built?", "when did they knock down the old stadium",
         "opposites");
}

Test(guard, what_a_review_of_the_third_hunts_rules_found)
{
    /* a passive of a thing is no role of the asker's, and a text is itself */
    PASS("How do I train a dog that was trained badly?",
         "How do I train a dog that was trained badly?");
    PASS("How do I repair a phone that was repaired by a third party?",
         "how do i repair a phone that was repaired by a third party");
    /* the language R is no "are"; "y won't" is "why won't" */
    VETO("What R package is best for mixed models?", "What package is best for mixed models?",
         NULL);
    PASS("y won't my car start", "why won't my car start");
    /* a million written 5M; a second dot makes no number of a thousand */
    PASS("is 5M a lot of views", "is 5 million a lot of views");
    VETO("is 1.5.3k a lot", "is 1483 a lot", "numbers");
    /* a verb that ends so is no superlative */
    PASS("How do I ingest data into Snowflake?", "how to ingest data into snowflake");
}
